"""``ToolPlan``: the tool side of one chat request, from rendering its prompt to reading its output.

Invariants:
- ``render`` runs where the tokenizer lives (the engine thread); it picks the parser family once
  (the server's ``--tool-call-parser``, else the chat template's) and uses that same family for the
  prompt and for ``parser``, so what the prompt asks for is what gets parsed.
- ``parser`` is None until rendered, and stays None when the output is not read for calls (no tools,
  or ``tool_choice: "none"``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent_engine.server.tools.choice import ToolChoice
from agent_engine.server.tools.openai_wire import openai_tool_calls
from agent_engine.server.tools.parser import ToolParser, make_tool_parser
from agent_engine.server.tools.render import render_chat_prompt

OutputReader = Callable[[str], list[dict[str, Any]]]


@dataclass
class ToolPlan:
    """The request's tools, its ``tool_choice`` and the family to use (None: the template's)."""

    tools: list[dict[str, Any]] | None
    choice: ToolChoice
    family: str | None = None
    parser: ToolParser | None = None

    def render(self, tokenizer: Any, messages: list[dict[str, Any]]) -> str:
        """The prompt text; sets ``parser`` when the output is to be read for calls."""
        parser = make_tool_parser(self.family, tokenizer, self.choice)
        self.parser = parser if self.choice.parses else None
        return render_chat_prompt(tokenizer, messages, self.tools, self.choice, family=parser.name)

    def output_reader(self) -> OutputReader | None:
        """Decoded output -> its OpenAI ``tool_calls`` (for the estimator); None when not parsing."""
        parser = self.parser
        if parser is None:
            return None
        return lambda text: openai_tool_calls(parser.parse(text).tool_calls)


def configured_family(app_state: Any) -> str | None:
    """The ``--tool-call-parser`` of the app's ``ServerConfig`` (None: chosen from the chat template)."""
    config = getattr(app_state, "server_config", None)
    return getattr(config, "tool_call_parser", None)
