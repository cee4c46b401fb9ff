from urlquery import build_url, join_path


def test_build_url_with_params():
    assert build_url("https://api.example.com/items", {"tag": ["red", "blue"], "limit": 20}) \
        == "https://api.example.com/items?tag=red&tag=blue&limit=20"


def test_build_url_without_params():
    assert build_url("https://example.com/a") == "https://example.com/a"
    assert build_url("https://example.com/a", {"x": None}) == "https://example.com/a"


def test_fragments():
    assert build_url("https://example.com/doc#intro", {"v": 2}) == \
        "https://example.com/doc?v=2#intro"
    assert build_url("https://example.com/doc#intro", fragment="usage") == \
        "https://example.com/doc#usage"


def test_join_path():
    assert join_path("https://example.com/api/", "users", "a b", 7) == \
        "https://example.com/api/users/a%20b/7"
