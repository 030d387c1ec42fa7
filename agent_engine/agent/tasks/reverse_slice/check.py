"""Exits 0 exactly when text.reverse reverses."""

import sys

from text import reverse, shout

checks = [
    (reverse("abc") == "cba", f"reverse('abc') = {reverse('abc')!r}, expected 'cba'"),
    (reverse("") == "", "reverse('') should be ''"),
    (shout("hi") == "HI!", "shout broke"),
]

failures = [msg for ok, msg in checks if not ok]
for msg in failures:
    print("FAIL", msg)
if failures:
    sys.exit(1)
print("OK")
