"""Evaluate a parse tree exactly, with ``fractions.Fraction``."""

from fractions import Fraction

from exprcalc.parser import parse


def evaluate_tree(tree):
    """The value of ``tree`` (see ``exprcalc.parser``) as a Fraction."""
    kind = tree[0]
    if kind == "num":
        return Fraction(tree[1])
    if kind == "neg":
        return -evaluate_tree(tree[1])
    left, right = evaluate_tree(tree[1]), evaluate_tree(tree[2])
    if kind == "+":
        return left + right
    if kind == "-":
        return left - right
    if kind == "*":
        return left * right
    if kind == "/":
        if right == 0:
            raise ZeroDivisionError("division by zero")
        return left / right
    if kind == "%":
        if right == 0:
            raise ZeroDivisionError("modulo by zero")
        return left - right * (left // right)
    if kind == "^":
        if right.denominator != 1:
            raise ValueError("only whole powers are supported")
        if left == 0 and right < 0:
            raise ZeroDivisionError("zero to a negative power")
        return left ** int(right)
    raise ValueError(f"unknown node {kind!r}")


def evaluate(text):
    """The exact value of the expression ``text``."""
    return evaluate_tree(parse(text))
