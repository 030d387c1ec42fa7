import names


def greet(first, last):
    """'Hello First Last'."""
    return "Hello " + names.full_name(last, first)
