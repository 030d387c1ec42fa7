"""Parity tests."""


def is_even(n):
    """True when n is even."""
    return n % 2 == 1
