import pytest

from inventory import Inventory, OutOfStock


def test_add_restock_remove():
    stock = Inventory()
    stock.add("A", "Apple", 50, quantity=10)
    stock.restock("A", 5)
    stock.remove("A", 12)
    assert stock.get("A").quantity == 3
    with pytest.raises(OutOfStock):
        stock.remove("A", 4)


def test_value_and_low_stock():
    stock = Inventory()
    stock.add("A", "Apple", 50, quantity=10)
    stock.add("B", "Bread", 300, quantity=2)
    stock.add("C", "Cheese", 700, quantity=1)
    assert stock.value() == 500 + 600 + 700
    assert stock.low_stock(3) == ["B", "C"]


def test_invalid_items():
    stock = Inventory()
    stock.add("A", "Apple", 50)
    with pytest.raises(ValueError):
        stock.add("A", "Again", 50)
    with pytest.raises(KeyError):
        stock.get("Z")
