from dataclasses import dataclass


class OutOfStock(Exception):
    def __init__(self, sku, wanted, available):
        super().__init__(f"{sku}: wanted {wanted}, only {available} in stock")
        self.sku, self.wanted, self.available = sku, wanted, available


@dataclass
class Item:
    sku: str
    name: str
    unit_price: int
    quantity: int = 0


class Inventory:
    def __init__(self):
        self._items = {}

    def add(self, sku, name, unit_price, quantity=0):
        if sku in self._items:
            raise ValueError(f"{sku} already exists")
        if unit_price < 0 or quantity < 0:
            raise ValueError("price and quantity cannot be negative")
        self._items[sku] = Item(sku, name, unit_price, quantity)

    def get(self, sku):
        try:
            return self._items[sku]
        except KeyError:
            raise KeyError(f"unknown SKU {sku!r}") from None

    def restock(self, sku, quantity):
        if quantity <= 0:
            raise ValueError("restock quantity must be positive")
        self.get(sku).quantity += quantity

    def remove(self, sku, quantity):
        item = self.get(sku)
        if quantity > item.quantity:
            raise OutOfStock(sku, quantity, item.quantity)
        item.quantity -= quantity

    def value(self):
        return sum(item.unit_price * item.quantity for item in self._items.values())

    def low_stock(self, threshold):
        return sorted(sku for sku, item in self._items.items() if item.quantity < threshold)
