"""``EngineRequest``: one request as it enters the engine, a frozen message built once.

The message from the edge into the engine (vLLM V1's ``EngineCoreRequest`` plays this part there).
A server builds it on its tokenizer pool from what a route described (``server.async_engine``), an
offline caller with ``LLMEngine.make_request``; ``LLMEngine.add_request`` takes nothing else.

Invariants:
- ``prompt_token_ids`` is the prompt tokenized once, non-empty and in the vocabulary (whoever built the
  message checked it with ``tokenize_prompt``); ``prompt_text`` is the text it came from, if any.
- ``hints`` are as the engine keys them: a tenant's job id in its namespace (``JobHints.scoped``);
  ``tenant`` and the output constraint (``structured``) are read from ``hints`` and ``params``, each
  kept in one place.
- ``grammar``, when set, is ``params.structured`` compiled for this engine's tokenizer (the engine
  refuses any other); without it the engine compiles the constraint itself.
- ``arrival_time`` None means "now by the engine's clock when it takes the request".
- ``tool_reader``, when set, reads the output's tool calls as the API returns them (the server's
  parser, chosen when the prompt was rendered); the engine hands it, with its tokenizer, to the
  scheduler's request (``engine.turn_reader.DecodedTurn``), so the estimator names the turn's tool
  from the calls the client saw (a forced call's opening lives in the prompt, not the output).
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_engine.engine.grammar_build import ReadyGrammar
from scheduler import NO_HINTS, JobHints, SamplingParams, StructuredSpec
from scheduler.turn_output import ToolReader

__all__ = ["EngineRequest"]


@dataclass(frozen=True, slots=True)
class EngineRequest:
    """A request for the engine: what to generate from, how, and for which job (see the module docstring)."""

    request_id: str
    prompt_token_ids: tuple[int, ...]
    prompt_text: str | None
    params: SamplingParams
    hints: JobHints = NO_HINTS
    grammar: ReadyGrammar | None = None
    arrival_time: float | None = None
    tool_reader: ToolReader | None = None

    def __post_init__(self) -> None:
        if not self.prompt_token_ids:
            raise ValueError("prompt must contain at least one token")  # as the scheduler's Request says

    @property
    def tenant(self) -> str | None:
        """Whose request it is (None: the default tenant)."""
        return self.hints.tenant

    @property
    def structured(self) -> StructuredSpec | None:
        """The output constraint, if any (``params.structured``)."""
        return self.params.structured
