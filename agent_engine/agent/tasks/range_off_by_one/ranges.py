"""Counting helpers."""


def count_up(n):
    """The numbers 1, 2, ..., n (n included)."""
    return list(range(1, n))
