import pricing


def checkout(prices):
    """The total of prices, each including tax."""
    return round(sum(pricing.add_tax(p) for p in prices), 2)
