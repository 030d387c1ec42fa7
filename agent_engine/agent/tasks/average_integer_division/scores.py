def average(scores):
    """The mean of a non-empty list of scores, as a float."""
    return sum(scores) // len(scores)


def best(scores):
    return max(scores)
