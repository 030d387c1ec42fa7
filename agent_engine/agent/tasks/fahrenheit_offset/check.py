"""Exits 0 exactly when the temperature conversions are right."""

import sys

from temps import to_celsius, to_fahrenheit

checks = [
    (to_fahrenheit(0) == 32, f"temps.to_fahrenheit(0) = {to_fahrenheit(0)}, expected 32"),
    (to_fahrenheit(100) == 212, f"temps.to_fahrenheit(100) = {to_fahrenheit(100)}, expected 212"),
    (to_celsius(212) == 100, "temps.to_celsius(212) should be 100"),
]

failures = [msg for ok, msg in checks if not ok]
for msg in failures:
    print("FAIL", msg)
if failures:
    sys.exit(1)
print("OK")
