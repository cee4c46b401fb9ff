from slugkit import slugify


def test_basic():
    assert slugify("Hello, World!") == "hello-world"
    assert slugify("  many   spaces  ") == "many-spaces"


def test_accents_are_transliterated():
    assert slugify("Crème brûlée: a how-to") == "creme-brulee-a-how-to"
    assert slugify("Ærøskøbing") == "rskbing"


def test_separator_and_max_length():
    assert slugify("Hello big world", separator="_") == "hello_big_world"
    assert slugify("hello world foo", max_length=11) == "hello-world"
    assert slugify("hello world foo", max_length=8) == "hello"
    assert slugify("abcdefghij", max_length=4) == "abcd"


def test_nothing_left():
    assert slugify("!!!") == ""
