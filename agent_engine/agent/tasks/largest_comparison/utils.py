def largest(xs):
    """The largest item of a non-empty list."""
    best = xs[0]
    for x in xs[1:]:
        if x < best:
            best = x
    return best
