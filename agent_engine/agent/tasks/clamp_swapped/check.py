"""Exits 0 exactly when mathx.clamp clamps."""

import sys

from mathx import clamp

checks = [
    (clamp(5, 0, 10) == 5, f"clamp(5, 0, 10) = {clamp(5, 0, 10)}, expected 5"),
    (clamp(-3, 0, 10) == 0, f"clamp(-3, 0, 10) = {clamp(-3, 0, 10)}, expected 0"),
    (clamp(42, 0, 10) == 10, f"clamp(42, 0, 10) = {clamp(42, 0, 10)}, expected 10"),
]

failures = [msg for ok, msg in checks if not ok]
for msg in failures:
    print("FAIL", msg)
if failures:
    sys.exit(1)
print("OK")
