"""Exits 0 exactly when calc.add adds."""

import sys

from calc import add, double

cases = [((2, 3), 5), ((-1, 1), 0), ((10, 0), 10)]
bad = [(args, want, add(*args)) for args, want in cases if add(*args) != want]
if bad or double(4) != 8:
    print(f"FAIL add: {bad}, double(4) = {double(4)}")
    sys.exit(1)
print("OK")
