"""Exits 0 exactly when cart.can_add follows limits.json."""

import sys

from cart import can_add


def _ok():
    try:
        return can_add([1, 2]) and not can_add([1, 2, 3])
    except TypeError as e:
        print("FAIL TypeError", e)
        return False


checks = [
    (_ok(), "can_add([1, 2]) should be True and can_add([1, 2, 3]) False"),
]

failures = [msg for ok, msg in checks if not ok]
for msg in failures:
    print("FAIL", msg)
if failures:
    sys.exit(1)
print("OK")
