"""What a suspect function's text alone says of it, beside the tests' spectrum: the issue's words it
uses, and the marks of a broken function.

Part of the tool program (``agent_engine.agent.aci.tool_program`` runs this source before
``repair_tool``'s, in one namespace); ``repair_tool.suspects`` ranks with both. Standard library only;
importing it runs nothing.

Invariants: pure (reads only the strings given), never raises.
"""

from __future__ import annotations

import ast
import math
import re
import textwrap

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WORD_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
COMMON_WORDS = frozenset({
    "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif", "else", "except",
    "false", "finally", "for", "from", "global", "import", "lambda", "none", "nonlocal", "not", "pass", "raise",
    "return", "true", "try", "while", "with", "yield", "self", "cls", "the", "that", "this", "but", "are", "was",
    "its", "has", "have", "should", "would", "when", "then", "than", "into", "out", "all", "any", "can",
    "does", "instead", "gives", "returns", "expected", "got", "print", "args", "kwargs"})
ENDS_BLOCK = (ast.Return, ast.Raise, ast.Continue, ast.Break)  # nothing of its block runs after one


def looks_broken(text: str) -> bool:
    """Whether a function's text holds what no finished function does: a statement after a ``return``,
    ``raise``, ``continue`` or ``break`` of its block (dead code), or a docstring below its first
    statement: the marks of lines moved or lost. Such a function the failing tests reach ranks first."""
    tree = _parsed(text)
    if tree is None:
        return False
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and any(isinstance(s, ENDS_BLOCK) and not _empty_generator(block[i + 1:])
                                               for i, s in enumerate(block[:-1])):
                return True
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(
                isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str)
                for s in node.body[1:]):
            return True
    return False


def words(text: str) -> set[str]:
    """The lower-case words of identifiers and prose in ``text`` (``NpmSpec`` -> ``npm``, ``spec``;
    ``next_minor`` -> ``next``, ``minor``), of three letters or more, Python's keywords and the commonest
    names left out."""
    found: set[str] = set()
    for token in _IDENTIFIER.findall(text):
        for part in _WORD_PART.findall(token):
            word = part.lower()
            if len(word) >= 3 and word not in COMMON_WORDS:
                found.add(word)
    return found


def issue_overlap(issue: str, sources: dict[tuple[str, str], str]) -> dict[tuple[str, str], float]:
    """How much of the issue's vocabulary each function's source uses, weighted by rarity among the
    functions (inverse document frequency) and scaled so the highest is 1.0; {} without an issue."""
    asked = words(issue)
    if not asked or not sources:
        return {}
    vocab = {fn: words(text) & asked for fn, text in sources.items()}
    df: dict[str, int] = {}
    for used in vocab.values():
        for word in used:
            df[word] = df.get(word, 0) + 1
    n = len(sources)
    raw = {fn: sum(math.log((n + 1) / (df[w] + 0.5)) for w in used) for fn, used in vocab.items()}
    top = max(raw.values(), default=0.0)
    return {fn: value / top for fn, value in raw.items()} if top > 0 else {}


def _parsed(text: str) -> ast.Module | None:
    """A function's text parsed: dedented, or under ``if True:`` (a method whose strings reach column 0)."""
    for source in (textwrap.dedent(text), "if True:\n" + text):
        try:
            return ast.parse(source)
        except (SyntaxError, ValueError, RecursionError):
            continue
    return None


def _empty_generator(rest: list[ast.stmt]) -> bool:
    """``return`` then a lone ``yield``: the idiom of a generator that yields nothing."""
    return len(rest) == 1 and isinstance(rest[0], ast.Expr) and isinstance(rest[0].value, ast.Yield | ast.YieldFrom)
