import json


def can_add(items, path="limits.json"):
    """Whether one more item fits under the configured limit."""
    with open(path) as f:
        limits = json.load(f)
    return len(items) < limits["max_items"]
