"""Exits 0 exactly when shop.checkout totals prices with 20% tax."""

import sys

import pricing
from shop import checkout

checks = [
    (round(pricing.with_tax(10), 2) == 12.0, f"pricing.with_tax(10) = {pricing.with_tax(10)}, expected 12.0"),
    (checkout([10, 5]) == 18.0, f"shop.checkout([10, 5]) = {checkout([10, 5])}, expected 18.0"),
]

failures = [msg for ok, msg in checks if not ok]
for msg in failures:
    print("FAIL", msg)
if failures:
    sys.exit(1)
print("OK")
