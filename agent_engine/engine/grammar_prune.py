"""Which parts of a grammar can produce output at all, and the grammar without the parts that cannot.

A rule is *productive* when it derives at least one finite string. A constraint whose root rule is not
(``root ::= root``, a ``$ref`` cycle, the regex ``[^\\s\\S]``, a required property whose pattern
matches nothing) admits no output: ``productive_grammar`` raises ``EmptyLanguageError`` for it, so it
is refused before it is queued. A grammar whose root is productive may still hold traps: an optional
branch that cannot be finished (an optional property whose ``$ref`` loops). The token mask would let
a model walk into one, and then allow no token at all; ``productive_grammar`` drops every such
branch, so a decoded output can always be completed; a triggered tag that could not be completed
(the tag that opens a tool call whose arguments match nothing) is refused like an empty constraint,
since dropping it would leave its trigger as free text.

This reads xgrammar's serialized grammar (``Grammar.serialize_json``, format ``v16`` of xgrammar
0.2.8): ``rules`` are ``[name, body_expr_id, lookahead_expr_id, ...]`` and expression ``i`` is
``[type, payload_length, *payload]``, starting in ``grammar_expr_data`` at ``grammar_expr_indptr[i]`` with the types of
``GrammarExprType`` below. An expression type this module does not know counts as productive (never
a false refusal); ``tests/test_grammar_checks.py`` pins the format.

Invariants: ``productive_grammar`` returns the grammar unchanged when every rule is productive; the
pruned grammar's language is the original's (only branches that produced nothing are gone); lookahead
assertions are not analysed (they consume no output).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum

MAX_CODEPOINT = 0x10FFFF


class ExprType(IntEnum):
    """xgrammar's ``Grammar::Impl::GrammarExprType`` (the order is the serialized value)."""

    BYTE_STRING = 0
    CHARACTER_CLASS = 1  # payload: [is_negative, lower0, upper0, lower1, upper1, ...]
    CHARACTER_CLASS_STAR = 2
    EMPTY_STR = 3
    RULE_REF = 4  # payload: [rule_id]
    SEQUENCE = 5  # payload: [expr_id, ...]
    CHOICES = 6  # payload: [expr_id, ...]
    TAG_DISPATCH = 7  # payload: [tag_expr, rule_id, ..., loop_after_dispatch, excluded_str_expr]
    REPEAT = 8  # payload: [rule_id, min_count, max_count]
    TOKEN = 9  # payload: [token_id, ...]
    EXCLUDE_TOKEN = 10
    TOKEN_TAG_DISPATCH = 11
    REGEX = 12  # payload: [json_string, pattern bytes...]


class EmptyLanguageError(ValueError):
    """The constraint admits no output at all."""


@dataclass
class SerializedGrammar:
    """A serialized grammar's document with its expressions split out (``exprs[i] = [type, *payload]``)."""

    doc: dict[str, object]
    exprs: list[list[int]]
    rule_names: list[str]
    rule_bodies: list[int]
    root: int

    @classmethod
    def parse(cls, text: str) -> SerializedGrammar:
        doc = json.loads(text)
        data, starts = doc["grammar_expr_data"], doc["grammar_expr_indptr"]
        exprs = [[data[s]] + data[s + 2:e] for s, e in zip(starts, [*starts[1:], len(data)], strict=True)]
        rules = doc["rules"]
        return cls(doc, exprs, [str(r[0]) for r in rules], [int(r[1]) for r in rules], int(doc["root_rule_id"]))

    def dump(self) -> str:
        data: list[int] = []
        starts = []
        for e in self.exprs:
            starts.append(len(data))
            data += [e[0], len(e) - 1, *e[1:]]
        return json.dumps({**self.doc, "grammar_expr_data": data, "grammar_expr_indptr": starts})


RegexCheck = Callable[[str], bool]  # pattern -> whether it matches some string


def productive_grammar(text: str, regex_productive: RegexCheck) -> str:
    """``text`` (a serialized grammar) without its unproductive branches; ``EmptyLanguageError`` naming
    the root's dead rules if nothing is left. ``regex_productive`` decides regex rules (xgrammar keeps
    a pattern as text until it compiles it)."""
    g = SerializedGrammar.parse(text)
    rules = _productive_rules(g, regex_productive)
    if not rules[g.root]:
        dead = [g.rule_names[r] for r in _reachable(g, g.root) if not rules[r]]
        raise EmptyLanguageError(
            "the output format admits no output: no finite text satisfies it (a rule that only refers to "
            f"itself, a reference cycle, or a pattern that matches nothing; rules {', '.join(dead[:5])})")
    if all(rules):
        return text
    _prune(g, rules)
    return g.dump()


def _productive_rules(g: SerializedGrammar, regex_productive: RegexCheck) -> list[bool]:
    """The least fixed point of "a rule is productive if its body is", from all False, for every rule
    (visited in post-order, so an acyclic grammar settles in one pass)."""
    rules = [False] * len(g.rule_bodies)
    seen: set[int] = set()
    order: list[int] = []
    for start in [g.root, *range(len(g.rule_bodies))]:
        if start not in seen:
            order += _post_order(g, start, seen)
    regex_memo: dict[int, bool] = {}
    changed = True
    while changed:
        changed = False
        for r in order:
            if not rules[r] and _expr_productive(g, g.rule_bodies[r], rules, regex_productive, regex_memo):
                rules[r] = changed = True
    return rules


def _expr_productive(g: SerializedGrammar, i: int, rules: list[bool], regex_productive: RegexCheck,
                     regex_memo: dict[int, bool]) -> bool:
    e = g.exprs[i]
    kind, payload = e[0], e[1:]
    if kind == ExprType.CHARACTER_CLASS:
        return _class_nonempty(payload)
    if kind == ExprType.RULE_REF:
        return rules[payload[0]]
    if kind == ExprType.SEQUENCE:
        return all(_expr_productive(g, c, rules, regex_productive, regex_memo) for c in payload)
    if kind == ExprType.CHOICES:
        return any(_expr_productive(g, c, rules, regex_productive, regex_memo) for c in payload)
    if kind == ExprType.REPEAT:
        return payload[1] == 0 or rules[payload[0]]
    if kind == ExprType.TOKEN:
        return bool(payload)
    if kind == ExprType.REGEX:
        if i not in regex_memo:
            regex_memo[i] = regex_productive(bytes(payload[1:]).decode("utf-8", "replace"))
        return regex_memo[i]
    return True  # strings, starred classes, the empty string, free text with tags, unknown types


def _class_nonempty(payload: list[int]) -> bool:
    negative, bounds = payload[0], payload[1:]
    ranges = sorted((lo, hi) for lo, hi in zip(bounds[::2], bounds[1::2], strict=True) if lo <= hi)
    if not negative:
        return bool(ranges)
    reach = 0  # every codepoint below ``reach`` is excluded so far
    for lo, hi in ranges:
        if lo > reach:
            return True
        reach = max(reach, hi + 1)
    return reach <= MAX_CODEPOINT


def _prune(g: SerializedGrammar, rules: list[bool]) -> None:
    """Drop the alternatives and optional repeats that cannot be finished (in place); a dispatched tag
    that cannot be is an ``EmptyLanguageError``."""
    memo: dict[int, bool] = {}

    def alive(i: int) -> bool:
        return _expr_productive(g, i, rules, lambda _p: True, memo)

    for i, e in enumerate(g.exprs):
        kind = e[0]
        if kind == ExprType.CHOICES:
            kept = [c for c in e[1:] if alive(c)]
            if kept:
                g.exprs[i] = [kind, *kept]
        elif kind == ExprType.REPEAT and e[2] == 0 and not rules[e[1]]:
            g.exprs[i] = [ExprType.EMPTY_STR]
        elif kind == ExprType.TAG_DISPATCH:
            pairs = e[1:-2]
            dead = [t for t, r in zip(pairs[::2], pairs[1::2], strict=True) if not rules[r]]
            if dead:  # once its trigger is written, nothing could complete it: the whole output is refused
                raise EmptyLanguageError(f"the output format admits no output after {_text(g, dead[0])!r}: "
                                         "what must follow it (a tool's arguments?) matches nothing")


def _text(g: SerializedGrammar, expr: int) -> str:
    """The text of a byte-string expression (a tag's trigger), for messages."""
    e = g.exprs[expr]
    return bytes(e[1:]).decode("utf-8", "replace") if e[0] == ExprType.BYTE_STRING else f"expression {expr}"


def _post_order(g: SerializedGrammar, root: int, seen: set[int] | None = None) -> list[int]:
    """Rules reachable from ``root`` and not in ``seen`` (which grows), each after the rules its body
    refers to (an iterative depth-first search)."""
    seen = set() if seen is None else seen
    seen.add(root)
    order = []
    stack: list[tuple[int, list[int]]] = [(root, _refs(g, g.rule_bodies[root]))]
    while stack:
        rule, todo = stack[-1]
        if todo:
            nxt = todo.pop()
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, _refs(g, g.rule_bodies[nxt])))
        else:
            stack.pop()
            order.append(rule)
    return order


def _reachable(g: SerializedGrammar, root: int) -> list[int]:
    return list(reversed(_post_order(g, root)))


def _refs(g: SerializedGrammar, expr: int) -> list[int]:
    """The rules an expression refers to (through nested sequences and choices)."""
    out, todo = [], [expr]
    while todo:
        e = g.exprs[todo.pop()]
        kind, payload = e[0], e[1:]
        if kind in (ExprType.RULE_REF, ExprType.REPEAT):
            out.append(payload[0])
        elif kind in (ExprType.SEQUENCE, ExprType.CHOICES):
            todo += payload
        elif kind == ExprType.TAG_DISPATCH:
            out += payload[1:-2:2]
    return out
