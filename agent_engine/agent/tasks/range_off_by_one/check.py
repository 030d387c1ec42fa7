"""Exits 0 exactly when ranges.count_up includes n."""

import sys

from ranges import count_up

if count_up(3) != [1, 2, 3] or count_up(1) != [1] or count_up(0) != []:
    print(f"FAIL count_up(3) = {count_up(3)}, count_up(1) = {count_up(1)}")
    sys.exit(1)
print("OK")
