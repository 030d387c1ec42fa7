"""Exits 0 exactly when units.hours_to_seconds is right."""

import sys

from units import hours_to_seconds

if hours_to_seconds(1) != 3600 or hours_to_seconds(2) != 7200:
    print(f"FAIL hours_to_seconds(1) = {hours_to_seconds(1)}")
    sys.exit(1)
print("OK")
