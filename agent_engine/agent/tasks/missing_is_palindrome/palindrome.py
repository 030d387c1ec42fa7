def normalize(s):
    """s in lower case without spaces."""
    return s.replace(" ", "").lower()
