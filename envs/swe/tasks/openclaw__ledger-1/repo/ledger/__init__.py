"""A double-entry ledger for shared expenses."""

from .journal import Entry, Ledger, Posting, UnbalancedEntry, UnknownAccount
from .money import format_cents, parse_amount
from .split import split_amount, split_expense

__all__ = ["Entry", "Ledger", "Posting", "UnbalancedEntry", "UnknownAccount", "format_cents",
           "parse_amount", "split_amount", "split_expense"]
