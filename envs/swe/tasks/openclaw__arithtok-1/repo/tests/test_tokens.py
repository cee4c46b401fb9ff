import pytest

from arithtok import Token, TokenizeError, tokenize


def test_tokenize_simple():
    assert tokenize("12+3") == [Token("number", 12, 0), Token("op", "+", 2),
                                Token("number", 3, 3)]


def test_decimals_and_negative_numbers():
    values = [t.value for t in tokenize("-1.5 * (2 - -3)")]
    assert values == [-1.5, "*", "(", 2, "-", -3, ")"]


def test_unexpected_character():
    with pytest.raises(TokenizeError, match="position 2"):
        tokenize("1 $ 2")
    with pytest.raises(TokenizeError):
        tokenize("1.2.3")
