"""Settings with their defaults."""

DEFAULTS = {"retries": 3, "timout": 30}


def get(name):
    """The default value of the setting called name."""
    return DEFAULTS[name]


def timeout():
    """The default timeout in seconds."""
    return get("timeout")
