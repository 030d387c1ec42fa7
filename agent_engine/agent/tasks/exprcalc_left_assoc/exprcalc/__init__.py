"""exprcalc: parse and evaluate arithmetic expressions exactly (rational numbers).

    >>> from exprcalc import evaluate
    >>> evaluate("1 + 2 * (3 - 1) / 4")
    Fraction(2, 1)
"""

from exprcalc.evaluator import evaluate, evaluate_tree
from exprcalc.parser import ParseError, parse
from exprcalc.tokenizer import Token, TokenizeError, tokenize

__all__ = ["ParseError", "Token", "TokenizeError", "evaluate", "evaluate_tree", "parse", "tokenize"]
