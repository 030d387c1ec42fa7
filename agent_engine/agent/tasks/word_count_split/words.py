def count_words(text):
    """How many words text holds (words are separated by any whitespace)."""
    return len(text.split(" "))
