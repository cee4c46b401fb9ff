def split_amount(total, parts):
    """Splits total cents into `parts` shares that add up to total, as evenly as possible."""
    if parts < 1:
        raise ValueError("need at least one share")
    share = total // parts
    return [share] * parts


def split_expense(ledger, description, payer, amount, participants):
    """Records that payer paid `amount` cents for participants, who each owe a share."""
    shares = split_amount(amount, len(participants))
    postings = [(payer, amount)]
    postings += [(person, -share) for person, share in zip(participants, shares)]
    return ledger.post(description, postings)
