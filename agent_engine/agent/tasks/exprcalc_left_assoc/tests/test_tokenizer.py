import unittest

from exprcalc import Token, TokenizeError, tokenize


def texts(source):
    return [t.text for t in tokenize(source)]


class TokenizerTest(unittest.TestCase):
    def test_integers_and_operators(self):
        self.assertEqual(texts("12+3*45"), ["12", "+", "3", "*", "45", ""])

    def test_spaces_are_skipped(self):
        self.assertEqual(texts("  7 \t-  2 "), ["7", "-", "2", ""])

    def test_decimals(self):
        self.assertEqual(texts("3.25 + .5"), ["3.25", "+", ".5", ""])

    def test_parentheses_and_power(self):
        self.assertEqual(texts("(2^3)%5"), ["(", "2", "^", "3", ")", "%", "5", ""])

    def test_positions(self):
        self.assertEqual(tokenize("1 + 22")[2], Token("num", "22", 4))

    def test_end_token(self):
        self.assertEqual(tokenize("")[-1].kind, "end")

    def test_kinds(self):
        self.assertEqual([t.kind for t in tokenize("4/2")], ["num", "op", "num", "end"])

    def test_bad_character(self):
        with self.assertRaises(TokenizeError):
            tokenize("2 & 3")

    def test_letters_are_refused(self):
        with self.assertRaises(TokenizeError):
            tokenize("x + 1")


if __name__ == "__main__":
    unittest.main()
