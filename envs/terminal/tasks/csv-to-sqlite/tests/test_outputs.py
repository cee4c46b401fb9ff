import sqlite3


def rows():
    db = sqlite3.connect("file:/app/shop.db?mode=ro", uri=True)
    return sorted(db.execute("SELECT name, price FROM products").fetchall())


def test_rows():
    assert rows() == [("lamp", 19.5), ("mug", 7.25), ("pen", 1.0), ("table, small", 120.0)]


def test_price_is_numeric():
    assert sum(p for _, p in rows()) == 147.75
