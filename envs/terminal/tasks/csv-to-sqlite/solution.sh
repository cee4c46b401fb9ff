#!/bin/bash
# The reference solution.
python3 - <<'END'
import csv, sqlite3
db = sqlite3.connect("/app/shop.db")
db.execute("CREATE TABLE products(name TEXT, price REAL)")
with open("/app/products.csv") as f:
    db.executemany("INSERT INTO products VALUES (?, ?)", [(r["name"], float(r["price"])) for r in csv.DictReader(f)])
db.commit()
END
