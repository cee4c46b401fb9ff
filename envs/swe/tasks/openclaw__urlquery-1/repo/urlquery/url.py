from urllib.parse import quote

from .query import encode_query


def join_path(base, *segments):
    """Appends path segments to base, quoting each and keeping single slashes."""
    url = base.rstrip("/")
    for segment in segments:
        url += "/" + quote(str(segment).strip("/"), safe="")
    return url


def build_url(base, params=None, fragment=None):
    """base with params added to its query string.

    A fragment in base is kept unless another one is given.
    """
    url, _, old_fragment = base.partition("#")
    query = encode_query(params or {})
    if query:
        url += "?" + query
    if fragment is None:
        fragment = old_fragment
    if fragment:
        url += "#" + quote(fragment, safe="/-_.~")
    return url
