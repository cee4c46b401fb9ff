"""Stock keeping and order quotes."""

from .pricing import DEFAULT_TIERS, line_total, quote, tier_percent
from .stock import Inventory, Item, OutOfStock

__all__ = ["DEFAULT_TIERS", "Inventory", "Item", "OutOfStock", "line_total", "quote",
           "tier_percent"]
