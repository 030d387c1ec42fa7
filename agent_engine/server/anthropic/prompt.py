"""The prompt of a Messages request: its chat form rendered by the chat path's tool-aware renderer.

Invariants:
- ``/v1/messages`` and ``/v1/messages/count_tokens`` render a request through ``prompt_of``, so the
  counted tokens are the tokens the model sees.
- Tools, tool calls and tool results are rendered exactly as for ``/v1/chat/completions`` (``ToolPlan``:
  the server's ``--tool-call-parser`` family, else the chat template's); a forcing ``tool_choice``
  ends the prompt with the opening of a call, and the plan's parser reads it back.
- An assistant prefill is appended after the generation prompt, so the reply continues it (never
  together with a forced call: ``convert`` refuses that).
- When the output is read for tool calls and ``request_id`` is given, the engine's job hooks get the
  reader, so the estimator sees the calls the API returns (a forced call's name is in the prompt).
"""

from __future__ import annotations

from collections.abc import Callable

from agent_engine.server.anthropic.convert import ChatForm
from agent_engine.server.engine_like import EngineLike
from agent_engine.server.tools import parse_tool_choice
from agent_engine.server.tools.plan import ToolPlan


def tool_plan(form: ChatForm, family: str | None) -> ToolPlan:
    """The request's tool plan (``family`` None: the chat template's). Raises ValueError."""
    return ToolPlan(form.tools, parse_tool_choice(form.tool_choice, form.tools), family)


def prompt_of(form: ChatForm, plan: ToolPlan, request_id: str | None = None) -> Callable[[EngineLike], str]:
    """The prompt as a function of the engine (run where its tokenizer lives); sets ``plan.parser``."""

    def render(engine: EngineLike) -> str:
        text = plan.render(engine.tokenizer, form.messages) + form.prefill
        reader = plan.output_reader()
        if request_id is not None and reader is not None:
            engine.job_hooks.read_output_with(request_id, reader)
        return text

    return render
