"""Exits 0 exactly when utils.largest returns the maximum."""

import sys

from utils import largest

checks = [
    (largest([3, 9, 4]) == 9, f"largest([3, 9, 4]) = {largest([3, 9, 4])}, expected 9"),
    (largest([-5, -2]) == -2, f"largest([-5, -2]) = {largest([-5, -2])}, expected -2"),
    (largest([7]) == 7, "largest([7]) should be 7"),
]

failures = [msg for ok, msg in checks if not ok]
for msg in failures:
    print("FAIL", msg)
if failures:
    sys.exit(1)
print("OK")
