"""exprcalc against Python's own arithmetic on thousands of random expressions (exact: Fractions)."""

import random
import unittest
from fractions import Fraction

from exprcalc import evaluate, parse

OPS = ["+", "-", "*", "/", "%"]


def random_expression(rng, depth):
    """A random expression as ``(our syntax, Python syntax)``."""
    if depth == 0 or rng.random() < 0.25:
        n = rng.randint(0, 30)
        return str(n), f"Fraction({n})"
    roll = rng.random()
    if roll < 0.1:
        ours, py = random_expression(rng, depth - 1)
        return f"-{ours}", f"-{py}"
    if roll < 0.2:
        ours, py = random_expression(rng, depth - 1)
        return f"({ours})", f"({py})"
    if roll < 0.25:
        base, exponent = rng.randint(1, 4), rng.randint(-2, 3)
        return f"{base} ^ {exponent}", f"Fraction({base}) ** {exponent}"
    op = rng.choice(OPS)
    left_ours, left_py = random_expression(rng, depth - 1)
    right_ours, right_py = random_expression(rng, depth - 1)
    return f"{left_ours} {op} {right_ours}", f"{left_py} {op} {right_py}"


def python_value(py):
    try:
        return eval(py, {"Fraction": Fraction})  # noqa: S307 - generated arithmetic only
    except ZeroDivisionError:
        return ZeroDivisionError


def our_value(ours):
    try:
        return evaluate(ours)
    except ZeroDivisionError:
        return ZeroDivisionError


class RandomExpressionTest(unittest.TestCase):
    def assert_all_equal(self, cases):
        """Every ``(text, ours, want)`` agrees; else one failure naming how many differ and the first few."""
        wrong = [(text, ours, want) for text, ours, want in cases if ours != want]
        examples = "; ".join(f"{text} gave {ours}, expected {want}" for text, ours, want in wrong[:3])
        if wrong:
            self.fail(f"{len(wrong)} of {len(cases)} differ, e.g. {examples}")

    def run_batch(self, seed, count, depth):
        rng = random.Random(seed)
        cases = []
        for _ in range(count):
            ours, py = random_expression(rng, depth)
            cases.append((ours, our_value(ours), python_value(py)))
        self.assert_all_equal(cases)

    def test_shallow_expressions(self):
        self.run_batch(1, 15000, 2)

    def test_medium_expressions(self):
        self.run_batch(2, 12000, 4)

    def test_deep_expressions(self):
        self.run_batch(3, 6000, 6)

    def test_flat_chains_of_sums(self):
        rng = random.Random(4)
        cases = []
        for _ in range(9000):
            numbers = [rng.randint(0, 50) for _ in range(rng.randint(2, 9))]
            ops = [rng.choice("+-") for _ in numbers[1:]]
            text = str(numbers[0]) + "".join(f" {op} {n}" for op, n in zip(ops, numbers[1:], strict=False))
            cases.append((text, evaluate(text), eval(text)))  # noqa: S307
        self.assert_all_equal(cases)

    def test_flat_chains_of_products(self):
        rng = random.Random(5)
        cases = []
        for _ in range(9000):
            numbers = [rng.randint(1, 12) for _ in range(rng.randint(2, 7))]
            ops = [rng.choice("*/") for _ in numbers[1:]]
            text = str(numbers[0]) + "".join(f" {op} {n}" for op, n in zip(ops, numbers[1:], strict=False))
            py = f"Fraction({numbers[0]})" + "".join(f" {op} Fraction({n})" for op, n in zip(ops, numbers[1:], strict=False))
            cases.append((text, evaluate(text), python_value(py)))
        self.assert_all_equal(cases)

    def test_fully_parenthesised_round_trip(self):
        rng = random.Random(6)
        cases = []
        for _ in range(7000):
            ours, _ = random_expression(rng, 5)
            tree = parse(ours)
            cases.append((ours, parse(unparse(tree)), tree))
        self.assert_all_equal(cases)


def unparse(tree):
    if tree[0] == "num":
        return tree[1]
    if tree[0] == "neg":
        return f"(-{unparse(tree[1])})"
    return f"({unparse(tree[1])} {tree[0]} {unparse(tree[2])})"


if __name__ == "__main__":
    unittest.main()
