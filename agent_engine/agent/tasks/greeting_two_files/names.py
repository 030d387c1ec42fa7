def full_name(first, last):
    """'First Last'."""
    return first + last
