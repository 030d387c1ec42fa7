"""Keep an agent's conversation inside the model's context: shrink it when, and only when, the next prompt
would not fit, and after the server refused one as too long.

A small model's window (4,096 or 8,192 tokens) holds a handful of test runs and file views; an agent
that keeps every observation verbatim ends its job with the server's ``context_length_exceeded`` long
before its step limit. SWE-agent's answer is to show only the last few observations in full. Doing
that on every turn would change the prompt's middle every turn, and with it the prefix the engine
caches (and CONTINUUM pins) for the job; so :class:`ContextFit` shrinks only when the estimated next
prompt passes the budget. Between two shrinks the prompt only grows, and the cached prefix stays valid.

The estimate is in the server's tokens: the ``prompt_tokens`` the server counted for the last prompt
(``observe``; it includes the chat template and the tools' schemas), plus the characters added or
removed since, at the tokens-per-character that count showed. Before any count, ``CHARS_PER_TOKEN``
characters a token over the messages and ``overhead_chars`` (the tools' schemas). A refusal
(``refused``) shows the estimate was low: the ratio is raised so that the refused prompt estimates
over the budget, and the next fit aims lower (``LEVELS``).

``fit`` shrinks in this order, each step only while the estimate is over the target:
1. old observations (all but the last ``keep_last``), oldest first, are replaced by ``ELIDED`` (how many
   characters they held and their first line);
2. old answers (all but the last ``keep_last``): long tool-call arguments (an edit's text) and long
   text answers are cut, the call's arguments staying a JSON object;
3. the last ``keep_last`` observations are cut to their head and tail (at least ``MIN_KEPT_CHARS``);
4. whole old turns (an answer and the observations after it) are dropped, oldest first, never the last;
5. the repository map is dropped from the task message (the task itself stays);
6. the last observations are cut to ``MIN_KEPT_CHARS // 3``.

Invariants:
- The system prompt and the task's text are never changed (step 5 drops only the map after it).
- Roles stay well formed: content is replaced in place, and a turn is only ever dropped whole (the
  assistant message and every observation answering it), so each ``tool`` message still follows the
  call it answers and its ``tool_call_id`` is unchanged.
- An elided observation says how many characters it held; nothing is elided twice.
- ``observation_chars`` bounds one new observation: ``OBSERVATION_SHARE`` of the budget, in characters
  at the current ratio.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agent_engine.agent.failures import cap_text
from agent_engine.agent.text_interface import REPO_MAP_HEADING

__all__ = ["CHARS_PER_TOKEN", "ELIDED", "LEVELS", "MARGIN_TOKENS", "ContextFit", "message_chars"]

CHARS_PER_TOKEN = 3.0  # before the server has counted a prompt: code and tracebacks run about 3
ELIDED = "[earlier output elided to fit the model's context: {chars} characters{gist}]"
_ELIDED_PREFIX = ELIDED.split("{", 1)[0]
GIST_CHARS = 60  # characters of an elided observation's first line kept in its note
MARGIN_TOKENS = 64  # the chat template's own tokens and the estimate's error
LEVELS = (1.0, 0.8, 0.6, 0.45, 0.3)  # the share of the budget aimed at, per attempt after refusals
MIN_KEPT_CHARS = 600  # a recent observation cut in step 3 keeps at least this much
ARGUMENT_CHARS = 200  # an old answer's argument or text longer than this is cut in step 2
OBSERVATION_SHARE = 0.25  # of the budget, one new observation at most
MAP_DROPPED = "(The repository map was dropped to fit the model's context: view_file . shows it.)"


def message_chars(messages: Sequence[dict[str, Any]]) -> int:
    """Characters of the conversation's contents and tool-call arguments."""
    total = 0
    for m in messages:
        total += len(m.get("content") or "")
        for call in m.get("tool_calls") or ():
            total += len(str((call.get("function") or {}).get("arguments") or ""))
    return total


def _gist(content: str) -> str:
    first = next((x.strip() for x in content.splitlines() if x.strip()), "")
    if not first:
        return ""
    return "; it began: " + (first if len(first) <= GIST_CHARS else first[:GIST_CHARS - 3] + "...")


@dataclass
class ContextFit:
    """The budget of one job's prompts: ``context_tokens`` of the model less the answer's ``reserve``."""

    context_tokens: int
    reserve_tokens: int
    keep_last: int = 2
    overhead_chars: int = 0  # prompt text outside the messages (the tools' schemas), before any count
    tokens_per_char: float = 1.0 / CHARS_PER_TOKEN
    counted_tokens: int | None = None  # the server's count of the last prompt
    counted_chars: int = 0  # that prompt's characters (messages and overhead)
    elided: int = 0  # messages elided or shortened so far

    @property
    def budget(self) -> int:
        return self.context_tokens - self.reserve_tokens - MARGIN_TOKENS

    def observation_chars(self) -> int:
        """The most characters one new observation may hold."""
        return max(MIN_KEPT_CHARS, int(self.budget * OBSERVATION_SHARE / self.tokens_per_char))

    def observe(self, messages: Sequence[dict[str, Any]], prompt_tokens: int) -> None:
        """The server counted ``prompt_tokens`` for ``messages`` (as sent): learn the count and the ratio."""
        chars = message_chars(messages) + self.overhead_chars
        if prompt_tokens > 0 and chars > 0:
            self.tokens_per_char = prompt_tokens / chars
            self.counted_tokens, self.counted_chars = prompt_tokens, chars

    def estimate(self, messages: Sequence[dict[str, Any]]) -> int:
        chars = message_chars(messages) + self.overhead_chars
        if self.counted_tokens is None:
            return int(chars * self.tokens_per_char) + 1
        return self.counted_tokens + int((chars - self.counted_chars) * self.tokens_per_char) + 1

    def refused(self, messages: Sequence[dict[str, Any]]) -> None:
        """The server refused ``messages`` as too long: raise the ratio so that they estimate over the
        budget (and at least 10% higher than before); forget the last count."""
        chars = message_chars(messages) + self.overhead_chars
        self.tokens_per_char = max(self.tokens_per_char * 1.1, (self.budget + 1) / max(1, chars))
        self.counted_tokens = None

    def fit(self, messages: list[dict[str, Any]], attempt: int = 0) -> int:
        """Shrink ``messages`` in place (see the module docstring) until the estimate is within
        ``LEVELS[attempt]`` of the budget or nothing more may go; returns how many messages changed."""
        target = int(self.budget * LEVELS[min(attempt, len(LEVELS) - 1)])
        done = 0
        steps = (self._elide_old_observations, self._cut_old_answers, self._cut_recent, self._drop_old_turns,
                 self._drop_map, self._cut_recent_hard)
        for step in steps:
            if self.estimate(messages) <= target:
                break
            done += step(messages, target)
        self.elided += done
        return done

    # the steps, each returning how many messages it changed

    def _observations(self, messages: Sequence[dict[str, Any]]) -> list[int]:
        """Indices of the observations (``tool`` messages, ``user`` messages after the task), in order."""
        users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
        task = users[0] if users else -1
        return [i for i, m in enumerate(messages) if m.get("role") in ("tool", "user") and i != task]

    def _answers(self, messages: Sequence[dict[str, Any]]) -> list[int]:
        return [i for i, m in enumerate(messages) if m.get("role") == "assistant"]

    def _elide_old_observations(self, messages: list[dict[str, Any]], target: int) -> int:
        seen = [i for i in self._observations(messages)
                if not str(messages[i].get("content") or "").startswith(_ELIDED_PREFIX)]
        done = 0
        for i in seen[: max(0, len(seen) - self.keep_last)]:
            if self.estimate(messages) <= target:
                break
            content = str(messages[i].get("content") or "")
            messages[i] = {**messages[i], "content": ELIDED.format(chars=len(content), gist=_gist(content))}
            done += 1
        return done

    def _cut_old_answers(self, messages: list[dict[str, Any]], target: int) -> int:
        answers = self._answers(messages)
        done = 0
        for i in answers[: max(0, len(answers) - self.keep_last)]:
            if self.estimate(messages) <= target:
                break
            m, changed = messages[i], False
            content = m.get("content")
            if isinstance(content, str) and len(content) > 2 * ARGUMENT_CHARS:
                m, changed = {**m, "content": cap_text(content, ARGUMENT_CHARS)}, True
            calls = []
            for call in m.get("tool_calls") or ():
                function = dict(call.get("function") or {})
                args = function.get("arguments")
                if isinstance(args, str) and len(args) > ARGUMENT_CHARS:
                    function["arguments"], changed = _cut_arguments(args), True
                calls.append({**call, "function": function})
            if changed:
                messages[i] = {**m, "tool_calls": calls} if m.get("tool_calls") else m
                done += 1
        return done

    def _cut_recent(self, messages: list[dict[str, Any]], target: int, floor: int = MIN_KEPT_CHARS) -> int:
        recent = self._observations(messages)[-self.keep_last:]
        done = 0
        for i in sorted(recent, key=lambda j: -len(str(messages[j].get("content") or ""))):
            over = self.estimate(messages) - target
            content = str(messages[i].get("content") or "")
            if over <= 0 or len(content) <= floor:
                continue
            keep = max(floor, len(content) - int(over / self.tokens_per_char) - 100)
            messages[i] = {**messages[i], "content": cap_text(content, keep)}
            done += 1
        return done

    def _cut_recent_hard(self, messages: list[dict[str, Any]], target: int) -> int:
        return self._cut_recent(messages, target, MIN_KEPT_CHARS // 3)

    def _drop_old_turns(self, messages: list[dict[str, Any]], target: int) -> int:
        done = 0
        while self.estimate(messages) > target:
            answers = self._answers(messages)
            if len(answers) < 2:
                break
            first, nxt = answers[0], answers[1]
            del messages[first:nxt]
            done += 1
        return done

    def _drop_map(self, messages: list[dict[str, Any]], target: int) -> int:
        users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
        if not users:
            return 0
        i = users[0]
        content = str(messages[i].get("content") or "")
        at = content.find("\n\n" + REPO_MAP_HEADING)
        if at < 0:
            return 0
        messages[i] = {**messages[i], "content": content[:at] + "\n\n" + MAP_DROPPED}
        return 1


def _cut_arguments(arguments: str) -> str:
    """A call's arguments with every long string value cut (still a JSON object when it was one)."""
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError:
        return cap_text(arguments, ARGUMENT_CHARS)
    if not isinstance(value, dict):
        return cap_text(arguments, ARGUMENT_CHARS)
    cut = {k: cap_text(v, ARGUMENT_CHARS // 2) if isinstance(v, str) and len(v) > ARGUMENT_CHARS else v
           for k, v in value.items()}
    return json.dumps(cut)
