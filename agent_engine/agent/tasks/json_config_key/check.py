"""Exits 0 exactly when config.json gives server.settings what it needs."""

import sys

from server import settings


def _ok():
    try:
        return settings() == ("127.0.0.1", 8080, 2)
    except KeyError as e:
        print("FAIL KeyError", e)
        return False


checks = [
    (_ok(), "server.settings() must return ('127.0.0.1', 8080, 2) from config.json"),
]

failures = [msg for ok, msg in checks if not ok]
for msg in failures:
    print("FAIL", msg)
if failures:
    sys.exit(1)
print("OK")
