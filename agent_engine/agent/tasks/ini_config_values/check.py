"""Exits 0 exactly when settings.ini loads as ('agent', False, 4)."""

import sys

from app import load


def _ok():
    try:
        return load() == ("agent", False, 4)
    except ValueError as e:
        print("FAIL ValueError", e)
        return False


checks = [
    (_ok(), "app.load() must return ('agent', False, 4)"),
]

failures = [msg for ok, msg in checks if not ok]
for msg in failures:
    print("FAIL", msg)
if failures:
    sys.exit(1)
print("OK")
