"""Exits 0 exactly when palindrome.is_palindrome works."""

import sys

try:
    from palindrome import is_palindrome
except ImportError:
    print('FAIL palindrome.is_palindrome does not exist')
    sys.exit(1)

checks = [
    (is_palindrome("Never odd or even"), "is_palindrome('Never odd or even') should be True"),
    (not is_palindrome("agent"), "is_palindrome('agent') should be False"),
    (is_palindrome(""), "is_palindrome('') should be True"),
]

failures = [msg for ok, msg in checks if not ok]
for msg in failures:
    print("FAIL", msg)
if failures:
    sys.exit(1)
print("OK")
