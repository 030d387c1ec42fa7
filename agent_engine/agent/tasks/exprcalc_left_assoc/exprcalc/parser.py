"""A recursive-descent parser: tokens to a tree of nested tuples.

Grammar (lowest precedence first; every binary operator is left-associative except ``^``):

    sum     := product (("+" | "-") product)*
    product := unary (("*" | "/" | "%") unary)*
    unary   := ("-" | "+") unary | power
    power   := atom ("^" unary)?
    atom    := NUMBER | "(" sum ")"

A tree is ``("num", text)``, ``("neg", tree)`` or ``(op, left, right)``.
"""

from exprcalc.tokenizer import tokenize


class ParseError(ValueError):
    """The tokens do not form an expression."""


class _Parser:
    def __init__(self, tokens):
        self.tokens = tokens
        self.i = 0

    def peek(self):
        return self.tokens[self.i]

    def next(self):
        token = self.tokens[self.i]
        self.i += 1
        return token

    def expect(self, text):
        token = self.next()
        if token.text != text:
            raise ParseError(f"expected {text!r} at {token.pos}, found {token.text or 'the end'!r}")
        return token

    def parse_sum(self):
        node = self.parse_product()
        while self.peek().kind == "op" and self.peek().text in "+-":
            op = self.next().text
            right = self.parse_sum()
            node = (op, node, right)
        return node

    def parse_product(self):
        node = self.parse_unary()
        while self.peek().kind == "op" and self.peek().text in "*/%":
            op = self.next().text
            right = self.parse_unary()
            node = (op, node, right)
        return node

    def parse_unary(self):
        token = self.peek()
        if token.kind == "op" and token.text == "-":
            self.next()
            return ("neg", self.parse_unary())
        if token.kind == "op" and token.text == "+":
            self.next()
            return self.parse_unary()
        return self.parse_power()

    def parse_power(self):
        base = self.parse_atom()
        if self.peek().kind == "op" and self.peek().text == "^":
            self.next()
            return ("^", base, self.parse_unary())
        return base

    def parse_atom(self):
        token = self.next()
        if token.kind == "num":
            return ("num", token.text)
        if token.text == "(":
            node = self.parse_sum()
            self.expect(")")
            return node
        raise ParseError(f"unexpected {token.text or 'end'!r} at {token.pos}")


def parse(text):
    """The tree of the expression ``text``; ParseError (or TokenizeError) when it is not one."""
    parser = _Parser(tokenize(text))
    tree = parser.parse_sum()
    if parser.peek().kind != "end":
        token = parser.peek()
        raise ParseError(f"unexpected {token.text!r} at {token.pos}")
    return tree
