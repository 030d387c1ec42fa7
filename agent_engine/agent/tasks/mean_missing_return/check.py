"""Exits 0 exactly when stats.mean returns the mean."""

import sys

from stats import mean

if mean([1, 2, 3]) != 2 or mean([4]) != 4 or mean([]) != 0.0:
    print(f"FAIL mean([1, 2, 3]) = {mean([1, 2, 3])!r}")
    sys.exit(1)
print("OK")
