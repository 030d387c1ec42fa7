"""Exits 0 exactly when text_utils.slugify works."""

import sys

from text_utils import slugify

checks = [
    (slugify("Hello, World!") == "hello-world", "slugify('Hello, World!') should be 'hello-world'"),
    (slugify("  Agent  Engine 2 ") == "agent-engine-2", "slugify('  Agent  Engine 2 ') should be 'agent-engine-2'"),
]

failures = [msg for ok, msg in checks if not ok]
for msg in failures:
    print("FAIL", msg)
if failures:
    sys.exit(1)
print("OK")
