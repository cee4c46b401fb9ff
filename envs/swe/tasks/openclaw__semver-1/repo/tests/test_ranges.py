from semver import matches, max_satisfying


def test_matches_all_comparators():
    assert matches("1.4.2", ">=1.4.0 <2.0.0")
    assert not matches("2.0.0", ">=1.4.0 <2.0.0")
    assert matches("1.4.0", "1.4.0")
    assert matches("1.4.0", "!=1.3.0")


def test_max_satisfying():
    versions = ["1.2.0", "1.3.1", "2.0.0", "1.3.0"]
    assert max_satisfying(versions, "<2.0.0") == "1.3.1"
    assert max_satisfying(versions, ">3.0.0") is None
