"""Exits 0 exactly when words.count_words counts words."""

import sys

from words import count_words

MIXED = "one  two\nthree "
checks = [
    (count_words("one two three") == 3, "words.count_words('one two three') should be 3"),
    (count_words(MIXED) == 3, f"words.count_words({MIXED!r}) = {count_words(MIXED)}, expected 3: words are separated by any whitespace"),
    (count_words("") == 0, f"words.count_words('') = {count_words('')}, expected 0"),
]

failures = [msg for ok, msg in checks if not ok]
for msg in failures:
    print("FAIL", msg)
if failures:
    sys.exit(1)
print("OK")
