from .stock import OutOfStock

# (minimum quantity, percent off)
DEFAULT_TIERS = [(10, 5), (50, 10), (100, 15)]


def tier_percent(quantity, tiers=DEFAULT_TIERS):
    """The discount, in percent, of the highest tier that quantity reaches (0 if none)."""
    for minimum, percent in sorted(tiers):
        if quantity >= minimum:
            return percent
    return 0


def line_total(unit_price, quantity, tiers=DEFAULT_TIERS):
    """The price of a line after its bulk discount, rounded half up to the cent."""
    gross = unit_price * quantity
    discount = (gross * tier_percent(quantity, tiers) + 50) // 100
    return gross - discount


def quote(inventory, order, tiers=DEFAULT_TIERS):
    """Prices an order ({sku: quantity}) without changing stock."""
    lines = []
    for sku, quantity in order.items():
        item = inventory.get(sku)
        if quantity > item.quantity:
            raise OutOfStock(sku, quantity, item.quantity)
        lines.append({
            "sku": sku,
            "quantity": quantity,
            "percent_off": tier_percent(quantity, tiers),
            "total": line_total(item.unit_price, quantity, tiers),
        })
    return {"lines": lines, "total": sum(line["total"] for line in lines)}
