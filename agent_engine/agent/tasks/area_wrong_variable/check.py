"""Exits 0 exactly when geometry.rect_area is width * height."""

import sys

from geometry import rect_area, rect_perimeter

checks = [
    (rect_area(2, 5) == 10, f"rect_area(2, 5) = {rect_area(2, 5)}, expected 10"),
    (rect_area(3, 3) == 9, "rect_area(3, 3) should be 9"),
    (rect_perimeter(2, 5) == 14, "rect_perimeter broke"),
]

failures = [msg for ok, msg in checks if not ok]
for msg in failures:
    print("FAIL", msg)
if failures:
    sys.exit(1)
print("OK")
