import json


def settings(path="config.json"):
    """(host, port, workers) from the JSON config."""
    with open(path) as f:
        cfg = json.load(f)
    return cfg["host"], cfg["port"], cfg["workers"]
