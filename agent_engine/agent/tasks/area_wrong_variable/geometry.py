def rect_area(width, height):
    """The area of a width x height rectangle."""
    return width * width


def rect_perimeter(width, height):
    return 2 * (width + height)
