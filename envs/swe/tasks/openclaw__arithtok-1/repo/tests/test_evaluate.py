import pytest

from arithtok import ParseError, evaluate, rpn_string


def test_precedence():
    assert evaluate("2 + 3 * 4") == 14
    assert evaluate("2 * 3 ^ 2") == 18
    assert evaluate("7 % 4 + 1") == 4


def test_parentheses():
    assert evaluate("(2 + 3) * 4") == 20
    assert evaluate("((1))") == 1


def test_left_associative_operators():
    assert evaluate("10 - 4 - 3") == 3
    assert evaluate("100 / 10 / 5") == 2
    assert rpn_string("8 - 2 - 1") == "8 2 - 1 -"


def test_powers():
    assert evaluate("2 ^ 10") == 1024
    assert evaluate("(1 + 1) ^ 0.5") == pytest.approx(2 ** 0.5)


def test_rpn_string():
    assert rpn_string("1 + 2 * 3") == "1 2 3 * +"
    assert rpn_string("(1 + 2) * 3") == "1 2 + 3 *"


def test_errors():
    for text in ["(1 + 2", "1 + 2)", "1 +", "* 2", "1 2"]:
        with pytest.raises(ParseError):
            evaluate(text)
