from urlquery import encode_query, parse_query


def test_encode_basic_and_order():
    assert encode_query({"b": 2, "a": "x y"}) == "b=2&a=x%20y"
    assert encode_query([("q", "a&b"), ("q", "c")]) == "q=a%26b&q=c"


def test_encode_lists_none_and_bools():
    assert encode_query({"tag": ["red", "blue"], "page": None, "all": True}) == \
        "tag=red&tag=blue&all=true"
    assert encode_query({}) == ""


def test_parse_query():
    assert parse_query("?a=1&b=two+words&a=3&flag") == {
        "a": ["1", "3"], "b": ["two words"], "flag": [""],
    }
