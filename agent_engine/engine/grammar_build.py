"""From a ``StructuredSpec`` to the grammar that gets compiled: converted, measured, checked, pruned.

``prepare_grammar(spec, max_size)`` is the cheap half of compiling a constraint, and the half that can
refuse it; xgrammar's ``GrammarCompiler`` then does the expensive half (a token mask per grammar state).

- Conversion: a JSON schema, regex, choice list, EBNF grammar or structural tag becomes an xgrammar
  ``Grammar`` (what the library rejects is a ``GrammarRefused`` with code ``invalid_grammar``).
- Size: ``grammar_size`` is the length of the grammar's expression data (every rule, sequence,
  choice, character range and literal byte); past ``max_size`` the constraint is refused
  (``grammar_too_large``) before any compiling. Conversion is linear in the input, compiling is
  not (a schema with n optional properties compiles in O(n^2)): the cap is checked in between.
- Emptiness: a constraint that admits no output is refused (``grammar_admits_no_output``); one that
  admits output loses the branches that cannot be finished (``grammar_prune``).

The result is the grammar serialized (``Grammar.serialize_json``): plain text, so a worker process can
prepare it and hand it back (``grammar_workers``). ``compile_prepared`` compiles such a text, and a
``ReadyGrammar`` carries the result with its spec to the engine.
Invariants: everything here is deterministic, so a spec prepares to the same text in any process.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent_engine.engine.grammar_limits import DEFAULT_MAX_GRAMMAR_SIZE
from agent_engine.engine.grammar_prune import EmptyLanguageError, productive_grammar
from scheduler import StructuredSpec

if TYPE_CHECKING:
    import xgrammar

# Codes of refused constraints (the API's error ``code``; every one is a 400).
INVALID = "invalid_grammar"
TOO_LARGE = "grammar_too_large"
TOO_SLOW = "grammar_compile_timeout"
EMPTY = "grammar_admits_no_output"


@dataclass(frozen=True)
class ReadyGrammar:
    """A constraint compiled for one engine's tokenizer, ready for ``LLMEngine.add_request`` (light to
    import: the server passes it along without loading the grammar library or torch)."""

    spec: StructuredSpec
    compiled: xgrammar.CompiledGrammar


class GrammarRefused(ValueError):
    """A constraint the engine will not decode under; ``code`` says why (one of the codes above)."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


def choice_grammar(options: Sequence[str]) -> str:
    """An EBNF grammar whose language is exactly ``options`` (JSON string escapes are valid in xgrammar)."""
    return "root ::= " + " | ".join(json.dumps(o, ensure_ascii=False) for o in options)


def convert(spec: StructuredSpec) -> xgrammar.Grammar:
    """The xgrammar ``Grammar`` of ``spec``; ``GrammarRefused`` (``invalid_grammar``) if the library rejects it."""
    import xgrammar

    try:
        if spec.kind == "json":
            return xgrammar.Grammar.from_json_schema(str(spec.value), any_whitespace=spec.any_whitespace,
                                                     strict_mode=False)
        if spec.kind == "regex":
            return xgrammar.Grammar.from_regex(str(spec.value))
        if spec.kind == "choice":
            return xgrammar.Grammar.from_ebnf(choice_grammar(spec.value))
        if spec.kind == "structural_tag":
            return xgrammar.Grammar.from_structural_tag(str(spec.value))
        return xgrammar.Grammar.from_ebnf(str(spec.value))
    except (RuntimeError, ValueError, TypeError) as exc:
        raise GrammarRefused(f"invalid {spec.kind} for structured output: {first_line(exc)}", INVALID) from None


def grammar_size(serialized: str) -> int:
    """The length of a serialized grammar's expression data (see the module docstring)."""
    return len(json.loads(serialized)["grammar_expr_data"])


def prepare_grammar(spec: StructuredSpec, max_size: int = DEFAULT_MAX_GRAMMAR_SIZE) -> str:
    """``spec`` converted, measured against ``max_size``, checked for output and pruned: the serialized
    grammar to compile. Raises ``GrammarRefused``."""
    serialized = convert(spec).serialize_json()
    size = grammar_size(serialized)
    if size > max_size:
        raise GrammarRefused(f"the output format's grammar has {size:,} elements, more than the "
                             f"{max_size:,} this server compiles (--max-grammar-size)", TOO_LARGE)
    try:
        return productive_grammar(serialized, _regex_productive)
    except EmptyLanguageError as exc:
        raise GrammarRefused(str(exc), EMPTY) from None


def compile_prepared(compiler: xgrammar.GrammarCompiler, serialized: str) -> xgrammar.CompiledGrammar:
    """Compile a grammar ``prepare_grammar`` returned."""
    import xgrammar

    return compiler.compile_grammar(xgrammar.Grammar.deserialize_json(serialized))


def _regex_productive(pattern: str) -> bool:
    """Whether a pattern inside a grammar (a JSON string's ``pattern``) matches some string."""
    import xgrammar

    try:
        productive_grammar(xgrammar.Grammar.from_regex(pattern).serialize_json(), lambda _p: True)
    except EmptyLanguageError:
        return False
    except (RuntimeError, ValueError):
        return True  # a pattern the regex converter cannot read is the library's to judge
    return True


def first_line(exc: BaseException) -> str:
    """The library's message without its C++ source location prefix."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if text.startswith("[") and "] " in text:
        text = text.split("] ", 1)[1]
    if text.startswith("/") and ": " in text:  # "/path/file.cc:83: message"
        text = text.split(": ", 1)[1]
    return text
