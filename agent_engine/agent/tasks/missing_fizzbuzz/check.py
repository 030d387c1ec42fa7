"""Exits 0 exactly when fizz.fizzbuzz works."""

import sys

from fizz import fizzbuzz

checks = [
    ([fizzbuzz(i) for i in (1, 3, 5, 15, 22)] == ["1", "Fizz", "Buzz", "FizzBuzz", "22"], f"fizzbuzz of 1, 3, 5, 15, 22 = {[fizzbuzz(i) for i in (1, 3, 5, 15, 22)]}"),
]

failures = [msg for ok, msg in checks if not ok]
for msg in failures:
    print("FAIL", msg)
if failures:
    sys.exit(1)
print("OK")
