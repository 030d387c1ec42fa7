"""The fixed, machine-independent training corpus of the embedded default tokenizer.

The hand-written texts and word lists live in ``tokenizer_corpus.json`` beside this file; this module
expands them into the training corpus.

Invariants:
- ``corpus_texts()`` depends only on that data file and this module: no other file, no stdlib sources,
  no hash seeds, no locale. The expansion uses a private xorshift PRNG (``_XorShift64``) instead of
  ``random`` so a change in Python's ``random`` internals can never change the tokenizer.
- Changing either file changes the tokenizer, so it must come with a new ``DEFAULT_MODEL_VERSION``
  in ``agent_engine.model.default_model``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path

CORPUS_SEED = 0x5EED_C0DE_2024
CORPUS_DATA = Path(__file__).with_name("tokenizer_corpus.json")


@cache
def _data() -> dict[str, list[str]]:
    return json.loads(CORPUS_DATA.read_text(encoding="utf-8"))


class _XorShift64:
    """A tiny deterministic PRNG (xorshift64*), independent of Python's ``random`` module."""

    def __init__(self, seed: int) -> None:
        self.state = (seed & 0xFFFFFFFFFFFFFFFF) or 1

    def next(self) -> int:
        x = self.state
        x ^= (x >> 12) & 0xFFFFFFFFFFFFFFFF
        x ^= (x << 25) & 0xFFFFFFFFFFFFFFFF
        x ^= (x >> 27) & 0xFFFFFFFFFFFFFFFF
        self.state = x
        return (x * 0x2545F4914F6CDD1D) & 0xFFFFFFFFFFFFFFFF

    def below(self, n: int) -> int:
        return self.next() % n


def _base_texts() -> list[str]:
    return list(_data()["base_texts"])


def _template_line(rng: _XorShift64, data: dict[str, list[str]]) -> str:
    template = data["templates"][rng.below(len(data["templates"]))]
    slots = []
    for i in range(6):
        if i == 5 and rng.below(2):
            slots.append(str(rng.below(10_000)))
        elif rng.below(3) == 0:
            slots.append(_pick(rng, data["ident_parts"]))
        else:
            slots.append(_pick(rng, data["words"]))
    return template.format(*slots)


def _sentence_line(rng: _XorShift64, data: dict[str, list[str]]) -> str:
    return " ".join(_pick(rng, data["words"]) for _ in range(4 + rng.below(12))).capitalize() + "."


def _code_line(rng: _XorShift64, data: dict[str, list[str]]) -> str:
    parts = [_pick(rng, data["ident_parts"]) for _ in range(2 + rng.below(2))]
    camel = parts[0] + "".join(p.capitalize() for p in parts[1:])
    return f"    {'_'.join(parts)} = self.{camel}({rng.below(512)}, {rng.below(97) / 8:.3f})"


def _pick(rng: _XorShift64, items: list[str]) -> str:
    return items[rng.below(len(items))]


def _synthetic_lines(rng: _XorShift64, count: int) -> Iterator[str]:
    """Seeded recombination of the base vocabulary into sentences, code and shell-like lines."""
    data = _data()
    base_lines = [ln for text in _base_texts() for ln in text.splitlines() if ln.strip()]
    for _ in range(count):
        kind = rng.below(4)
        if kind == 0:
            yield _template_line(rng, data)
        elif kind == 1:
            yield _sentence_line(rng, data)
        elif kind == 2:
            yield _code_line(rng, data)
        else:
            yield _pick(rng, base_lines)


def corpus_texts(num_synthetic: int = 6000) -> list[str]:
    """Return the training corpus: the hand-written base texts (several copies) plus synthetic lines.

    Deterministic: the same list, byte for byte, on every machine and Python version.
    """
    rng = _XorShift64(CORPUS_SEED)
    texts = _base_texts() * 3
    texts.extend(_synthetic_lines(rng, num_synthetic))
    return texts
