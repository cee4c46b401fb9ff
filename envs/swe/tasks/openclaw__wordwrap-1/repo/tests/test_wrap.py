import pytest

from wordwrap import fill, fill_paragraphs, shorten, wrap


def test_wrap_words():
    text = "The quick brown fox jumps over the lazy dog"
    assert wrap(text, width=16) == ["The quick brown", "fox jumps over", "the lazy dog"]


def test_indents_count_towards_width():
    lines = wrap("one two three four five", width=13, indent="* ", subsequent_indent="  ")
    assert lines == ["* one two", "  three four", "  five"]


def test_long_words():
    text = "see https://example.com/very/long"
    assert wrap(text, width=10) == ["see", "https://ex", "ample.com/", "very/long"]
    assert wrap(text, width=10, break_long_words=False) == ["see", "https://example.com/very/long"]


def test_blank_text_and_bad_width():
    assert wrap("   \n ") == []
    with pytest.raises(ValueError):
        wrap("x", width=2, indent="  ")


def test_fill_paragraphs():
    assert fill_paragraphs("a b c\n\n\nd e\n", width=4) == "a b\nc\n\nd e"


def test_shorten():
    assert shorten("Hello   world", 20) == "Hello world"
    assert shorten("Hello world, this is long", 15) == "Hello [...]"
    assert len(shorten("Hello world, this is long", 18)) <= 18
