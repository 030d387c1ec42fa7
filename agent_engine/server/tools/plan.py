"""``ToolPlan``: the tool side of one chat request, from rendering its prompt to reading its output;
and ``render_chat_prompt``, the rendering itself.

Plan invariants:
- ``render`` runs where the tokenizer lives (the engine thread); it picks the parser family once
  (the server's ``--tool-call-parser``, else the chat template's) and uses that same family for the
  prompt and for ``parser``, so what the prompt asks for is what gets parsed.
- ``parser`` is None until rendered, and stays None when the output is not read for calls (no tools,
  or ``tool_choice: "none"``).
- ``constraint`` (after ``render``) is the grammar of the calls in the parser's family
  (``tools.constrain``), so the calls the engine decodes are the calls the parser reads.

``render_chat_prompt`` turns OpenAI-format messages and tools into the prompt text the model sees, in
one of two ways, chosen by the chat template:
- The template knows tools ("tools" appears in its source): it renders everything itself; assistant
  ``tool_calls`` reach it with ``arguments`` as a mapping (what Qwen / Llama / Mistral templates
  ``tojson``), ``content: null`` as "".
- It does not (ChatML-like templates, the embedded default model): the tools are described in the
  system message in the parser family's format, assistant calls are written as that family's call
  text and tool results as user messages (``<tool_response>...</tool_response>``; consecutive results
  share one message), so the model sees earlier calls exactly as it would have written them.

Rendering invariants:
- A request without tools, tool calls or tool messages renders exactly as
  ``apply_chat_template(messages, add_generation_prompt=True, tokenize=False)``.
- Tools are rendered even for ``tool_choice: "none"`` (as vLLM does); the output is then not parsed.
- A forcing ``tool_choice`` appends the family's opening of a call (``ToolParser.prefix``) after the
  generation prompt; the parser made for the same choice reads it back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agent_engine.json_types import JsonObject
from agent_engine.server.tools.choice import ToolChoice
from agent_engine.server.tools.constrain import call_constraint
from agent_engine.server.tools.families import Family, args_value
from agent_engine.server.tools.parsed import openai_tool_calls
from agent_engine.server.tools.parser import ToolParser, make_tool_parser, template_source
from scheduler import StructuredSpec
from scheduler.turn_output import ToolReader


@dataclass
class ToolPlan:
    """The request's tools, its ``tool_choice`` and the family to use (None: the template's)."""

    tools: list[JsonObject] | None
    choice: ToolChoice
    family: str | None = None
    parser: ToolParser | None = None
    parallel: bool = True  # more than one call per output (``parallel_tool_calls``)

    def render(self, tokenizer: Any, messages: list[JsonObject]) -> str:
        """The prompt text; sets ``parser`` when the output is to be read for calls."""
        parser = make_tool_parser(self.family, tokenizer, self.choice)
        self.parser = parser if self.choice.parses else None
        return render_chat_prompt(tokenizer, messages, self.tools, self.choice, family=parser.name)

    def constraint(self) -> StructuredSpec | None:
        """The grammar the output's calls are decoded under (None: unconstrained); call after ``render``."""
        if self.parser is None:
            return None
        return call_constraint(self.parser.family, self.tools, self.choice, self.parallel)

    def output_reader(self) -> ToolReader | None:
        """Decoded output -> its OpenAI ``tool_calls`` (for the estimator, carried on the request); None
        when not parsing. Call after ``render``."""
        parser = self.parser
        if parser is None:
            return None
        return lambda text: openai_tool_calls(parser.parse(text).tool_calls)


def configured_family(app_state: Any) -> str | None:
    """The ``--tool-call-parser`` of the app's ``ServerConfig`` (None: chosen from the chat template)."""
    config = getattr(app_state, "server_config", None)
    return getattr(config, "tool_call_parser", None)


SYSTEM_ROLES = ("system", "developer")


def render_chat_prompt(tokenizer: Any, messages: list[JsonObject], tools: list[JsonObject] | None,
                       tool_choice: ToolChoice, *, family: str | None = None) -> str:
    """The prompt text of a chat request (``family`` None: the template's own; ValueError if unknown)."""
    parser = make_tool_parser(family, tokenizer)
    if "tools" in template_source(tokenizer):
        kwargs: JsonObject = {"tools": list(tools)} if tools else {}
        text = tokenizer.apply_chat_template([_native(m) for m in messages], add_generation_prompt=True,
                                             tokenize=False, **kwargs)
    else:
        text = tokenizer.apply_chat_template(inline_messages(messages, tools, parser.family),
                                             add_generation_prompt=True, tokenize=False)
    return text + parser.forced_prefix(tool_choice)


def _native(message: JsonObject) -> JsonObject:
    """A message for a template that renders tool calls itself."""
    out = dict(message)
    if out.get("content") is None:
        out["content"] = ""
    if out.get("tool_calls"):
        out["tool_calls"] = [_native_call(c) for c in out["tool_calls"]]
    return out


def _native_call(call: JsonObject) -> JsonObject:
    fn = dict(call.get("function") or {})
    fn["arguments"] = args_value(fn.get("arguments"))
    return {**call, "type": call.get("type", "function"), "function": fn}


def inline_messages(messages: Sequence[JsonObject], tools: Sequence[JsonObject] | None,
                    family: Family) -> list[JsonObject]:
    """Messages for a template without tool support: tool traffic written as ``family`` text."""
    out: list[JsonObject] = []
    after_tool = False
    for m in messages:
        role = m.get("role")
        if role == "tool":
            result = family.tool_result(_text(m.get("content")))
            if after_tool:
                out[-1]["content"] += "\n" + result
            else:
                out.append({"role": "user", "content": result})
            after_tool = True
            continue
        after_tool = False
        plain = {k: v for k, v in m.items() if k not in ("tool_calls", "tool_call_id")}
        plain["content"] = _text(m.get("content"))
        if role == "assistant" and m.get("tool_calls"):
            calls = family.format_calls([_name_args(c) for c in m["tool_calls"]])
            plain["content"] = f"{plain['content']}\n{calls}" if plain["content"] else calls
        out.append(plain)
    if tools:
        _add_tool_description(out, family.describe(tools))
    return out


def _add_tool_description(messages: list[JsonObject], description: str) -> None:
    if messages and messages[0].get("role") in SYSTEM_ROLES:
        first = messages[0]
        first["content"] = f"{first['content']}\n\n{description}" if first["content"] else description
    else:
        messages.insert(0, {"role": "system", "content": description})


def _name_args(call: JsonObject) -> tuple[str, Any]:
    fn = call.get("function") or {}
    return str(fn.get("name", "")), fn.get("arguments")


def _text(content: Any) -> str:
    """Message content as text: None -> "", text parts joined."""
    if content is None:
        return ""
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return str(content)
