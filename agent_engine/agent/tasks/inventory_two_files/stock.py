def add_items(stock, name, count):
    """Add count units of name to the stock dict (name -> units)."""
    stock[name] = stock.get(name, 0) - count
    return stock
