"""Tool calling for the chat APIs: render tools into the prompt, parse calls out of the output.

Public interface (the OpenAI chat route and the Anthropic Messages route both use exactly these):

- ``parse_tool_choice(tool_choice, tools) -> ToolChoice``: validate OpenAI's ``tool_choice`` (ValueError).
- ``render_chat_prompt(tokenizer, messages, tools, tool_choice, *, family=None) -> str``: OpenAI-format
  messages (assistant ``tool_calls``, ``tool`` messages) and function tools -> prompt text; ends with
  the opening of a call when ``tool_choice`` forces one.
- ``make_tool_parser(family, tokenizer, tool_choice=None) -> ToolParser``: the parser of a family
  (None / "auto": the chat template's); ``parser.parse(text) -> ParsedOutput`` and
  ``parser.stream() -> StreamingToolParser`` (``feed(delta)`` / ``finish()`` -> ``list[DeltaEvent]``).
  Make it with the request's ``tool_choice`` so it reads a forced opening the prompt ended with.
- Families: hermes (default), llama3_json, mistral, pythonic (``FAMILIES``).

Layout: ``tool_schema`` (request models of tools), ``choice`` (``tool_choice``), ``plan`` (``ToolPlan``
and the prompt rendering), ``parser`` (``ToolParser``) over ``splitter`` and the families (``families``,
``pythonic``), ``parsed`` (what parsers produce, and its OpenAI wire form).

Invariants: parsing never raises and never loses text (what is not a call is content); a streamed
parse adds up to the whole-text parse, however the text is cut.
"""

from agent_engine.server.tools.choice import NO_TOOLS, ToolChoice, parse_tool_choice, tool_names
from agent_engine.server.tools.parsed import (
    DeltaEvent,
    ParsedOutput,
    ParsedToolCall,
    chunk_delta,
    new_call_id,
    openai_tool_calls,
)
from agent_engine.server.tools.parser import (
    DEFAULT_FAMILY,
    FAMILIES,
    StreamingToolParser,
    ToolParser,
    assemble,
    detect_family,
    family_name,
    make_tool_parser,
)
from agent_engine.server.tools.plan import render_chat_prompt

__all__ = [
    "DEFAULT_FAMILY",
    "FAMILIES",
    "NO_TOOLS",
    "DeltaEvent",
    "ParsedOutput",
    "ParsedToolCall",
    "StreamingToolParser",
    "ToolChoice",
    "ToolParser",
    "assemble",
    "chunk_delta",
    "detect_family",
    "family_name",
    "make_tool_parser",
    "new_call_id",
    "openai_tool_calls",
    "parse_tool_choice",
    "render_chat_prompt",
    "tool_names",
]
