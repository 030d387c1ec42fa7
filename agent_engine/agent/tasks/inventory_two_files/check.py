"""Exits 0 exactly when stock.add_items and report.total_units are right."""

import sys

from report import total_units
from stock import add_items

checks = [
    (add_items({}, "pen", 3) == {"pen": 3}, f"stock.add_items({{}}, 'pen', 3) = {add_items({}, 'pen', 3)}, expected {{'pen': 3}}"),
    (total_units({"pen": 3, "ink": 2}) == 5, f"report.total_units({{'pen': 3, 'ink': 2}}) = {total_units({'pen': 3, 'ink': 2})}, expected 5"),
]

failures = [msg for ok, msg in checks if not ok]
for msg in failures:
    print("FAIL", msg)
if failures:
    sys.exit(1)
print("OK")
