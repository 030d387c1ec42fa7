def reverse(s):
    """The characters of s in reverse order."""
    return s[::1]


def shout(s):
    return s.upper() + "!"
