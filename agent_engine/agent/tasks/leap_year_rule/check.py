"""Exits 0 exactly when dates.is_leap follows the Gregorian rules."""

import sys

from dates import days_in_year, is_leap

checks = [
    (is_leap(2024), "dates.is_leap(2024) should be True"),
    (not is_leap(1900), "dates.is_leap(1900) should be False"),
    (is_leap(2000), "dates.is_leap(2000) should be True: years divisible by 400 are leap years"),
    (days_in_year(2023) == 365, "days_in_year(2023) should be 365"),
]

failures = [msg for ok, msg in checks if not ok]
for msg in failures:
    print("FAIL", msg)
if failures:
    sys.exit(1)
print("OK")
