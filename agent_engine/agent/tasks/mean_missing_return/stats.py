"""Small statistics."""


def mean(xs):
    """The arithmetic mean of xs (0.0 for no values)."""
    if not xs:
        return 0.0
    total = sum(xs)
    total / len(xs)
