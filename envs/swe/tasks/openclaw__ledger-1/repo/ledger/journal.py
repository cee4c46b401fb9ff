from dataclasses import dataclass

from .money import format_cents


class UnbalancedEntry(ValueError):
    pass


class UnknownAccount(KeyError):
    pass


@dataclass(frozen=True)
class Posting:
    account: str
    amount: int  # cents; positive: the account is owed, negative: it owes


@dataclass(frozen=True)
class Entry:
    description: str
    postings: tuple


class Ledger:
    def __init__(self):
        self._accounts = []
        self._entries = []

    def open(self, account):
        if account not in self._accounts:
            self._accounts.append(account)

    def post(self, description, postings):
        """Records an entry from (account, cents) pairs, which must add up to zero."""
        items = tuple(Posting(account, amount) for account, amount in postings)
        for posting in items:
            if posting.account not in self._accounts:
                raise UnknownAccount(posting.account)
        total = sum(posting.amount for posting in items)
        if total != 0:
            raise UnbalancedEntry(f"{description!r} is off by {format_cents(total)}")
        entry = Entry(description, items)
        self._entries.append(entry)
        return entry

    def entries(self):
        return list(self._entries)

    def balance(self, account):
        if account not in self._accounts:
            raise UnknownAccount(account)
        return sum(p.amount for e in self._entries for p in e.postings if p.account == account)

    def balances(self):
        return {account: self.balance(account) for account in self._accounts}
