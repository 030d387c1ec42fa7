import unittest

from exprcalc import ParseError, TokenizeError, parse


def num(text):
    return ("num", text)


class ParserTest(unittest.TestCase):
    def test_a_number(self):
        self.assertEqual(parse("42"), num("42"))

    def test_product_binds_tighter_than_sum(self):
        self.assertEqual(parse("1 + 2 * 3"), ("+", num("1"), ("*", num("2"), num("3"))))

    def test_parentheses_override_precedence(self):
        self.assertEqual(parse("(1 + 2) * 3"), ("*", ("+", num("1"), num("2")), num("3")))

    def test_subtraction_is_left_associative(self):
        self.assertEqual(parse("8 - 3 - 2"), ("-", ("-", num("8"), num("3")), num("2")))

    def test_mixed_sum_is_left_associative(self):
        self.assertEqual(parse("1 - 2 + 3"), ("+", ("-", num("1"), num("2")), num("3")))

    def test_division_is_left_associative(self):
        self.assertEqual(parse("8 / 4 / 2"), ("/", ("/", num("8"), num("4")), num("2")))

    def test_power_is_right_associative(self):
        self.assertEqual(parse("2 ^ 3 ^ 2"), ("^", num("2"), ("^", num("3"), num("2"))))

    def test_unary_minus(self):
        self.assertEqual(parse("-3 * 2"), ("*", ("neg", num("3")), num("2")))

    def test_unary_minus_below_power(self):
        self.assertEqual(parse("-2 ^ 2"), ("neg", ("^", num("2"), num("2"))))

    def test_unary_plus_is_dropped(self):
        self.assertEqual(parse("+5"), num("5"))

    def test_missing_parenthesis(self):
        with self.assertRaises(ParseError):
            parse("(1 + 2")

    def test_trailing_tokens(self):
        with self.assertRaises(ParseError):
            parse("1 2")

    def test_dangling_operator(self):
        with self.assertRaises(ParseError):
            parse("1 +")

    def test_tokenizer_errors_pass_through(self):
        with self.assertRaises(TokenizeError):
            parse("1 $ 2")


if __name__ == "__main__":
    unittest.main()
