import pytest

from ledger import Ledger, UnbalancedEntry, UnknownAccount, split_amount, split_expense


@pytest.fixture
def book():
    book = Ledger()
    for name in ["ann", "bob", "cy"]:
        book.open(name)
    return book


def test_post_and_balances(book):
    book.post("Taxi", [("bob", 2000), ("ann", -1000), ("cy", -1000)])
    assert book.balances() == {"ann": -1000, "bob": 2000, "cy": -1000}
    assert len(book.entries()) == 1


def test_unbalanced_and_unknown_are_rejected(book):
    with pytest.raises(UnbalancedEntry, match="off by 0.01"):
        book.post("Oops", [("ann", 101), ("bob", -100)])
    with pytest.raises(UnknownAccount):
        book.post("Who", [("dan", 100), ("ann", -100)])
    assert book.entries() == []


def test_split_amount_even():
    assert split_amount(900, 3) == [300, 300, 300]
    assert split_amount(7, 1) == [7]
    with pytest.raises(ValueError):
        split_amount(100, 0)


def test_split_expense_even(book):
    split_expense(book, "Groceries", "ann", 9000, ["ann", "bob", "cy"])
    assert book.balances() == {"ann": 6000, "bob": -3000, "cy": -3000}
