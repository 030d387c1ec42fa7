"""Exits 0 exactly when settings.timeout() returns 30."""

import sys

import settings

try:
    value = settings.timeout()
except KeyError as e:
    print(f"FAIL settings.timeout() raised KeyError: {e}")
    sys.exit(1)
if value != 30 or settings.get("retries") != 3:
    print(f"FAIL settings.timeout() = {value}")
    sys.exit(1)
print("OK")
