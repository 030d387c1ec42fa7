def is_leap(year):
    """True for leap years of the Gregorian calendar."""
    return year % 4 == 0 and year % 100 != 0


def days_in_year(year):
    return 366 if is_leap(year) else 365
