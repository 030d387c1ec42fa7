def total_units(stock):
    """All units in the stock dict (name -> units)."""
    return len(stock)
