"""Turn an expression string into tokens: integers, decimals, operators and parentheses."""

from dataclasses import dataclass

OPERATORS = "+-*/%^()"


class TokenizeError(ValueError):
    """The text holds a character that starts no token."""


@dataclass(frozen=True)
class Token:
    kind: str  # "num", "op" or "end"
    text: str
    pos: int


def tokenize(text):
    """The tokens of ``text``, ending with one ``end`` token."""
    tokens = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch.isdigit() or (ch == "." and i + 1 < n and text[i + 1].isdigit()):
            start = i
            while i < n and text[i].isdigit():
                i += 1
            if i < n and text[i] == ".":
                i += 1
                while i < n and text[i].isdigit():
                    i += 1
            tokens.append(Token("num", text[start:i], start))
        elif ch in OPERATORS:
            tokens.append(Token("op", ch, i))
            i += 1
        else:
            raise TokenizeError(f"unexpected {ch!r} at {i}")
    tokens.append(Token("end", "", n))
    return tokens
