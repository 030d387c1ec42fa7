"""Keep an agent's conversation inside the model's context: elide old observations when, and only when,
the next prompt would not fit.

A small model's window (4,096 tokens) holds a handful of test runs and file views; an agent that keeps
every observation verbatim ends its job with the server's ``context_length_exceeded`` long before its
step limit. SWE-agent's answer is to show only the last few observations in full. Doing that on every
turn would change the prompt's middle every turn, and with it the prefix the engine caches (and
CONTINUUM pins) for the job; so :class:`ContextFit` elides only when the estimated next prompt passes
the budget, oldest observation first, keeping the system prompt, the task and the last
``keep_last`` observations whole. Between two elisions the prompt only grows, and the cached prefix
stays valid.

Invariants:
- The estimate is the conversation's characters times the tokens-per-character of the last prompt the
  server counted (``observe``); before any count, ``CHARS_PER_TOKEN`` characters a token.
- Only the content of ``tool`` messages and of ``user`` messages after the first is replaced; message
  order, roles and tool-call ids never change, so the conversation stays well formed.
- An elided observation says how many characters it held; it is never elided twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

CHARS_PER_TOKEN = 3.0  # before the server has counted a prompt: code and tracebacks run about 3
ELIDED = "[earlier output elided to fit the model's context: {chars} characters]"
_ELIDED_PREFIX = ELIDED.split("{", 1)[0]
MARGIN_TOKENS = 64  # the chat template's own tokens and the estimate's error


def message_chars(messages: Sequence[dict[str, Any]]) -> int:
    """Characters of the conversation's contents and tool-call arguments."""
    total = 0
    for m in messages:
        total += len(m.get("content") or "")
        for call in m.get("tool_calls") or ():
            total += len(str((call.get("function") or {}).get("arguments") or ""))
    return total


@dataclass
class ContextFit:
    """The budget of one job's prompts: ``context_tokens`` of the model less the answer's ``reserve``."""

    context_tokens: int
    reserve_tokens: int
    keep_last: int = 2
    tokens_per_char: float = 1.0 / CHARS_PER_TOKEN
    elided: int = 0  # observations elided so far

    @property
    def budget(self) -> int:
        return self.context_tokens - self.reserve_tokens - MARGIN_TOKENS

    def observe(self, messages: Sequence[dict[str, Any]], prompt_tokens: int) -> None:
        """The server counted ``prompt_tokens`` for ``messages`` (as sent): learn the ratio."""
        chars = message_chars(messages)
        if prompt_tokens > 0 and chars > 0:
            self.tokens_per_char = prompt_tokens / chars

    def estimate(self, messages: Sequence[dict[str, Any]]) -> int:
        return int(message_chars(messages) * self.tokens_per_char) + 1

    def fit(self, messages: list[dict[str, Any]], budget: int | None = None) -> int:
        """Elide the oldest observations in place until the estimate is within ``budget`` (default:
        :attr:`budget`) or nothing more may go; returns how many were elided now."""
        target = self.budget if budget is None else budget
        done = 0
        for i in self._elidable(messages):
            if self.estimate(messages) <= target:
                break
            messages[i] = {**messages[i], "content": ELIDED.format(chars=len(messages[i].get("content") or ""))}
            done += 1
        self.elided += done
        return done

    def _elidable(self, messages: Sequence[dict[str, Any]]) -> list[int]:
        """Indices of observations that may be elided, oldest first."""
        firsts = {i for i, m in enumerate(messages) if m.get("role") == "user"}
        task = min(firsts) if firsts else -1
        seen = [i for i, m in enumerate(messages)
                if m.get("role") in ("tool", "user") and i != task
                and not str(m.get("content") or "").startswith(_ELIDED_PREFIX)]
        return seen[: max(0, len(seen) - self.keep_last)]
