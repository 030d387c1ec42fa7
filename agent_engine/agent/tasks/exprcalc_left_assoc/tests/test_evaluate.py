import unittest
from fractions import Fraction

from exprcalc import evaluate


class EvaluateTest(unittest.TestCase):
    def check(self, text, want):
        self.assertEqual(evaluate(text), Fraction(want), text)

    def test_sum(self):
        self.check("1 + 2 + 3", 6)

    def test_chained_subtraction(self):
        self.check("10 - 4 - 3", 3)

    def test_subtraction_then_addition(self):
        self.check("10 - 4 + 3", 9)

    def test_long_chain(self):
        self.check("100 - 1 - 2 - 3 - 4 + 5 - 6", 89)

    def test_precedence(self):
        self.check("2 + 3 * 4", 14)

    def test_chained_division(self):
        self.check("100 / 10 / 5", 2)

    def test_exact_fractions(self):
        self.check("1 / 3 + 1 / 6", Fraction(1, 2))

    def test_decimals_are_exact(self):
        self.check("0.1 + 0.2", Fraction(3, 10))

    def test_modulo_follows_floor_division(self):
        self.check("-7 % 3", 2)

    def test_power(self):
        self.check("2 ^ 10", 1024)

    def test_power_chain(self):
        self.check("2 ^ 3 ^ 2", 512)

    def test_negative_power(self):
        self.check("2 ^ -2", Fraction(1, 4))

    def test_unary_minus_and_power(self):
        self.check("-2 ^ 2", -4)

    def test_nested_parentheses(self):
        self.check("((2 + 3) * (7 - 2)) - (4 - (1 - 1))", 21)

    def test_division_by_zero(self):
        with self.assertRaises(ZeroDivisionError):
            evaluate("1 / (2 - 2)")

    def test_fractional_power_is_refused(self):
        with self.assertRaises(ValueError):
            evaluate("4 ^ 0.5")


if __name__ == "__main__":
    unittest.main()
