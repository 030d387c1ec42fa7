"""Exits 0 exactly when names.full_name and greet.greet are right."""

import sys

from greet import greet
from names import full_name

checks = [
    (full_name("Ada", "Lovelace") == "Ada Lovelace", f"names.full_name('Ada', 'Lovelace') = {full_name('Ada', 'Lovelace')!r}, expected 'Ada Lovelace'"),
    (greet("Ada", "Lovelace") == "Hello Ada Lovelace", f"greet.greet('Ada', 'Lovelace') = {greet('Ada', 'Lovelace')!r}, expected 'Hello Ada Lovelace'"),
]

failures = [msg for ok, msg in checks if not ok]
for msg in failures:
    print("FAIL", msg)
if failures:
    sys.exit(1)
print("OK")
