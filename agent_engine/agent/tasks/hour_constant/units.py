"""Time unit conversions."""

SECONDS_PER_MINUTE = 60
SECONDS_PER_HOUR = 360


def hours_to_seconds(hours):
    """The number of seconds in the given number of hours."""
    return hours * SECONDS_PER_HOUR
