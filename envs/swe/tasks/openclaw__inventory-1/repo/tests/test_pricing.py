import pytest

from inventory import Inventory, OutOfStock, line_total, quote, tier_percent


def test_small_quantities():
    assert tier_percent(1) == 0
    assert tier_percent(9) == 0
    assert tier_percent(10) == 5
    assert tier_percent(49) == 5


def test_line_total_rounds_half_up():
    assert line_total(2000, 10) == 19000
    assert line_total(199, 3) == 597
    assert line_total(99, 10) == 940


def test_custom_single_tier():
    assert tier_percent(3, tiers=[(3, 20)]) == 20
    assert line_total(100, 3, tiers=[(3, 20)]) == 240


def test_quote():
    stock = Inventory()
    stock.add("PEN", "Pen", 120, quantity=500)
    stock.add("PAD", "Pad", 350, quantity=20)
    result = quote(stock, {"PEN": 12, "PAD": 2})
    assert [line["percent_off"] for line in result["lines"]] == [5, 0]
    assert result["total"] == 1368 + 700
    with pytest.raises(OutOfStock):
        quote(stock, {"PAD": 21})
    assert stock.get("PAD").quantity == 20
