def with_tax(price):
    """The price including 20% tax."""
    return price + 1.2
