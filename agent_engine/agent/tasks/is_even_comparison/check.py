"""Exits 0 exactly when parity.is_even is right."""

import sys

from parity import is_even

cases = {0: True, 1: False, 2: True, 7: False, -4: True}
bad = {n: is_even(n) for n, want in cases.items() if is_even(n) != want}
if bad:
    print(f"FAIL is_even gave {bad}")
    sys.exit(1)
print("OK")
