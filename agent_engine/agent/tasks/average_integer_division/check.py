"""Exits 0 exactly when scores.average is the exact mean."""

import sys

from scores import average, best

checks = [
    (average([1, 2]) == 1.5, f"scores.average([1, 2]) = {average([1, 2])}, expected 1.5"),
    (average([4, 4, 4]) == 4, "scores.average([4, 4, 4]) should be 4"),
    (best([3, 8]) == 8, "best broke"),
]

failures = [msg for ok, msg in checks if not ok]
for msg in failures:
    print("FAIL", msg)
if failures:
    sys.exit(1)
print("OK")
