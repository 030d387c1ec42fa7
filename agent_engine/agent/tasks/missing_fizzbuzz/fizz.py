def fizzbuzz(n):
    """'Fizz', 'Buzz', 'FizzBuzz' or str(n)."""
    pass
