import pytest

from semver import Version


def v(text):
    return Version.parse(text)


def test_parse_and_str_round_trip():
    for text in ["0.1.0", "1.2.3-alpha.1", "2.0.0+build.5", "1.0.0-rc.1+sha.abc"]:
        assert str(v(text)) == text


def test_invalid_versions():
    for text in ["1.2", "01.2.3", "1.2.3-", "v1.2.3", "1.2.3+"]:
        with pytest.raises(ValueError):
            v(text)


def test_numeric_parts_compare_as_numbers():
    assert v("1.10.0") > v("1.9.0")
    assert v("2.0.0") > v("1.99.99")
    assert v("0.0.2") < v("0.1.0")


def test_prerelease_identifiers():
    ordered = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta",
               "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1"]
    assert [str(x) for x in sorted(v(t) for t in reversed(ordered))] == ordered


def test_build_metadata_is_ignored():
    assert v("1.0.0+a") == v("1.0.0+b")
    assert len({v("1.0.0+a"), v("1.0.0")}) == 1


def test_bump():
    assert str(v("1.2.3-rc.1").bump("minor")) == "1.3.0"
    assert str(v("1.2.3").bump("major")) == "2.0.0"
    with pytest.raises(ValueError):
        v("1.2.3").bump("build")
