"""``ToolParser``: read tool calls out of a model's text, whole (``parse``) or as it streams (``stream``).

Invariants:
- ``parse(text)`` is ``stream()`` fed ``text`` whole and finished, so a stream fed the same text in
  any pieces gives the same content and calls (the ``Splitter`` decides nothing a later piece could
  change); a call is announced only once its whole block was read and parsed.
- Nothing the model wrote is lost and nothing raises: a block that does not parse is content. The one
  exception to "calls are parsed JSON": a call forced by name (the prompt ended with its opening)
  always is a call; arguments that are not a JSON object are kept as the model's raw text.
- Content is the text outside the calls with leading and trailing blanks removed (None if empty);
  streamed content holds back blanks until more text follows them.
- A parser made for a forcing ``ToolChoice`` reads the forced opening (``prefix``) before the output.
- An output cut short (``finish(truncated=True)``, the request hit ``max_tokens``) never ends in a
  call: a last block that its family's end marker did not close is content (without the forced
  opening, which the model did not write), whether or not it would parse.
"""

from __future__ import annotations

import json
from typing import Any

from agent_engine.server.tools.choice import ToolChoice
from agent_engine.server.tools.families import Family, Hermes, Llama3Json, Mistral, dumps
from agent_engine.server.tools.parsed import DeltaEvent, ParsedOutput, ParsedToolCall, new_call_id
from agent_engine.server.tools.pythonic import Pythonic
from agent_engine.server.tools.splitter import Splitter

FAMILIES: dict[str, Family] = {f.name: f for f in (Hermes(), Llama3Json(), Mistral(), Pythonic())}
DEFAULT_FAMILY = "hermes"
_DECODER = json.JSONDecoder()


class StreamingToolParser:
    """The incremental parse of one output: ``feed(delta)`` then ``finish()``, each a list of events."""

    def __init__(self, family: Family, prefix: str = "", forced_name: str | None = None) -> None:
        self._family = family
        self._split = Splitter(family.markers)
        self._buf = prefix
        self._prefix = prefix
        self._forced_name = forced_name
        self._first = True
        self._calls = 0
        self._started = False
        self._blank = ""

    def feed(self, delta: str) -> list[DeltaEvent]:
        self._buf += delta
        return self._drain(final=False)

    def finish(self, truncated: bool = False) -> list[DeltaEvent]:
        """The events of whatever was held back; trailing blanks are dropped. ``truncated``: the output
        was cut short, so an unclosed last block is content, not a call."""
        return self._drain(final=True, truncated=truncated)

    def _drain(self, final: bool, truncated: bool = False) -> list[DeltaEvent]:
        events: list[DeltaEvent] = []
        while self._buf:
            seg = self._split.next(self._buf, final)
            if seg is None:
                break
            kind, n = seg
            piece, self._buf = self._buf[:n], self._buf[n:]
            if kind == "text":
                events += self._text(piece)
            elif truncated and not self._buf and not self._closed(piece):
                events += self._text(self._written(piece))
            else:
                events += self._block(piece)
            self._first = False
        return events

    def _closed(self, block: str) -> bool:
        end = self._family.markers.end
        return end is not None and block.endswith(end)

    def _written(self, block: str) -> str:
        """What the model itself wrote of a block: without the forced opening from the prompt."""
        if self._first and self._prefix and block.startswith(self._prefix):
            return block[len(self._prefix):]
        return block

    def _block(self, block: str) -> list[DeltaEvent]:
        calls = self._family.parse_block(block)
        rest = ""
        if calls is None and self._first and self._forced_name is not None:
            calls, rest = self._salvage(block)
        if calls is None:
            return self._text(block)
        events: list[DeltaEvent] = []
        for name, arguments in calls:
            index, self._calls = self._calls, self._calls + 1
            events.append(DeltaEvent("tool_start", index=index, id=new_call_id(), name=name))
            events.append(DeltaEvent("tool_args", text=arguments, index=index))
        return events + self._text(rest)

    def _salvage(self, block: str) -> tuple[list[tuple[str, str]], str]:
        """The forced call of a block that did not parse: a leading JSON object as its arguments (the
        text after the object and its closing brackets stays content), else the raw text."""
        raw = block[len(self._prefix):]
        end = self._family.markers.end
        if end and raw.endswith(end):
            raw = raw[: -len(end)]
        assert self._forced_name is not None
        body = raw.lstrip()
        try:
            obj, pos = _DECODER.raw_decode(body)
        except (ValueError, RecursionError):
            return [(self._forced_name, raw.strip() or "{}")], ""
        if not isinstance(obj, dict):
            return [(self._forced_name, raw.strip())], ""
        rest = body[pos:].lstrip()
        for closer in self._family.closers:
            rest = rest.removeprefix(closer).lstrip()
        return [(self._forced_name, dumps(obj))], rest

    def _text(self, piece: str) -> list[DeltaEvent]:
        if not self._started:
            piece = piece.lstrip()
            if not piece:
                return []
            self._started = True
        text = self._blank + piece
        shown = text.rstrip()
        self._blank = text[len(shown):]
        return [DeltaEvent("content", text=shown)] if shown else []


class ToolParser:
    """The tool-call parser of one family, optionally for a forcing ``ToolChoice``."""

    def __init__(self, family: Family, tool_choice: ToolChoice | None = None) -> None:
        self.family = family
        self.tool_choice = tool_choice
        forced = tool_choice is not None and tool_choice.forces
        self.forced_name = tool_choice.name if forced and tool_choice is not None else None
        self.prefix = family.forced_prefix(self.forced_name) if forced else ""

    @property
    def name(self) -> str:
        return self.family.name

    def for_choice(self, tool_choice: ToolChoice | None) -> ToolParser:
        """This family's parser for ``tool_choice`` (reads the forced opening when it forces a call)."""
        return ToolParser(self.family, tool_choice)

    def forced_prefix(self, tool_choice: ToolChoice | None) -> str:
        """The text that ends the prompt for ``tool_choice``: "" unless it forces a call."""
        return self.for_choice(tool_choice).prefix

    def stream(self) -> StreamingToolParser:
        return StreamingToolParser(self.family, self.prefix, self.forced_name)

    def parse(self, text: str, truncated: bool = False) -> ParsedOutput:
        """The content and calls of a whole output (``truncated``: it was cut by ``max_tokens``)."""
        s = self.stream()
        return assemble(s.feed(text) + s.finish(truncated))


def assemble(events: list[DeltaEvent]) -> ParsedOutput:
    """The ``ParsedOutput`` that a list of stream events adds up to."""
    content = "".join(e.text for e in events if e.kind == "content")
    heads = {e.index: e for e in events if e.kind == "tool_start"}
    args: dict[int, list[str]] = {i: [] for i in heads}
    for e in events:
        if e.kind == "tool_args":
            args[e.index].append(e.text)
    calls = [ParsedToolCall(heads[i].id, heads[i].name, "".join(args[i])) for i in sorted(heads)]
    return ParsedOutput(content or None, calls)


def template_source(tokenizer: Any) -> str:
    """The tokenizer's chat template text ("" if none; named templates joined)."""
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):
        return "\n".join(str(t) for t in template.values())
    return template if isinstance(template, str) else ""


def detect_family(template: str) -> str:
    """The family a chat template's own tool-call format belongs to (hermes when it shows none)."""
    if "[TOOL_CALLS]" in template:
        return "mistral"
    if "<tool_call>" in template:
        return "hermes"
    if "[func_name1(" in template or "<|python_start|>" in template:
        return "pythonic"
    if "<|python_tag|>" in template or '"parameters": dictionary' in template:
        return "llama3_json"
    return DEFAULT_FAMILY


def family_name(family: str | None) -> str | None:
    """A family name in canonical form (``llama3-json`` -> ``llama3_json``); None or "auto" -> None.
    Raises ValueError for an unknown name, listing the known ones."""
    if family is None or family == "auto":
        return None
    name = family.strip().lower().replace("-", "_")
    if name not in FAMILIES:
        raise ValueError(f"unknown tool-call parser {family!r}; known: auto, {', '.join(FAMILIES)}")
    return name


def make_tool_parser(family: str | None, tokenizer: Any, tool_choice: ToolChoice | None = None) -> ToolParser:
    """The parser of ``family`` (None or "auto": the one the tokenizer's chat template uses).

    With a forcing ``tool_choice`` the parser reads the forced opening that ``render_chat_prompt``
    appended to the prompt before the output. Raises ValueError for an unknown family."""
    name = family_name(family) or detect_family(template_source(tokenizer))
    return ToolParser(FAMILIES[name], tool_choice)
