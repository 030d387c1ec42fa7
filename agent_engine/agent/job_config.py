"""The knobs of one agent job and the records it leaves: what ``agent_engine.agent.loop`` runs and writes.

Invariants:
- ``AgentConfig`` is validated when made (``ValueError`` naming the knob); it is frozen, so one
  config serves many jobs and attempts (``agent_engine.agent.attempts`` derives its own with
  ``dataclasses.replace``).
- One ``AgentTurnRecord`` per model call and one ``AgentJobRecord`` per job, in the replay's record
  format (``agent_engine.workloads.replay.records``): the same summaries read both.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from agent_engine.agent.aci import MAP_CHARS, SYSTEM_PROMPT_TOOLS, TOOLS
from agent_engine.agent.context_fit import MARGIN_TOKENS, ContextFit
from agent_engine.agent.repeats import Escalation
from agent_engine.agent.text_interface import SYSTEM_PROMPT, TOOL_COMMANDS
from agent_engine.workloads.hint_styles import HINT_STYLES
from agent_engine.workloads.replay.records import JobRecord, TurnRecord

__all__ = ["INTERFACES", "AgentConfig", "AgentJobRecord", "AgentJobResult", "AgentTurnRecord"]


INTERFACES = ("text", "tools")


@dataclass(frozen=True)
class AgentConfig:
    """Knobs of one agent job; ``max_tokens=None`` lets the server fill up to the context;
    ``system_prompt=None`` is the interface's own. ``temperature`` is the base temperature; after a
    repeated call the next one is sampled at ``repeat_temperature_step`` more per consecutive repeat, up
    to ``repeat_temperature_cap`` (``agent_engine.agent.repeats.Escalation``; a step of 0 keeps the base),
    with the seed ``seed + step``."""

    step_limit: int = 30
    max_tokens: int | None = None
    temperature: float = 0.0
    seed: int = 0
    repeat_temperature_step: float = Escalation.step
    repeat_temperature_cap: float = Escalation.cap
    model: str | None = None
    system_prompt: str | None = None
    stream: bool = True
    hints: str = "job_id"  # a style of agent_engine.workloads.hint_styles
    interface: str = "text"  # one of INTERFACES
    context_tokens: int | None = None  # the model's context; set: old observations elided to fit it
    aids: bool | None = None  # the repository map and the failing code; None: on for the tools interface
    map_chars: int = MAP_CHARS  # the repository map's budget in the task message

    @property
    def uses_aids(self) -> bool:
        """Whether the job gets the repository map and the failing code (see the module docstring)."""
        return self.aids if self.aids is not None else self.interface == "tools"

    @property
    def prompt(self) -> str:
        """The system prompt this job sends."""
        if self.system_prompt is not None:
            return self.system_prompt
        if self.interface == "tools":
            return SYSTEM_PROMPT_TOOLS
        return f"{SYSTEM_PROMPT} {TOOL_COMMANDS}" if self.uses_aids else SYSTEM_PROMPT

    def __post_init__(self) -> None:
        if self.interface not in INTERFACES:
            raise ValueError(f"unknown interface {self.interface!r}; known: {', '.join(INTERFACES)}")
        if self.hints not in HINT_STYLES:
            raise ValueError(f"unknown hint style {self.hints!r}; known: {', '.join(HINT_STYLES)}")
        if self.step_limit < 1:
            raise ValueError(f"step_limit must be >= 1, got {self.step_limit}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.map_chars < 0:
            raise ValueError(f"map_chars must be >= 0, got {self.map_chars}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if self.context_tokens is not None and self.context_tokens <= self.answer_reserve + MARGIN_TOKENS:
            raise ValueError(f"context_tokens {self.context_tokens} leaves no room for a prompt")
        self.escalation()  # validates the repeat knobs

    @property
    def answer_reserve(self) -> int:
        """Tokens of the context kept for the answer: ``max_tokens``, or 512 when the server decides."""
        return self.max_tokens if self.max_tokens is not None else 512

    def context_fit(self, context_tokens: int | None = None) -> ContextFit | None:
        """The job's context budget (None: the agent never elides), for ``context_tokens`` (default: the
        configured context)."""
        context = context_tokens or self.context_tokens
        if context is None or context <= self.answer_reserve + MARGIN_TOKENS:
            return None
        overhead = len(json.dumps(TOOLS)) if self.interface == "tools" else 0
        return ContextFit(context, self.answer_reserve, overhead_chars=overhead)

    def escalation(self) -> Escalation:
        """How repeats raise the temperature of this job's calls."""
        return Escalation(self.repeat_temperature_step, self.repeat_temperature_cap)


@dataclass
class AgentTurnRecord(TurnRecord):
    """A ``TurnRecord`` plus what the live agent measured: the command, its exit code and tool seconds.

    ``tool_sleep`` (the replay's time away from the engine) is set to the measured ``tool_seconds``, so
    replay and live-agent records read the same way; ``max_tokens`` is 0 when none was sent.
    ``temperature`` and ``seed`` are what the call was sent with (seed None: none sent); ``repeat_of``
    is the turn whose call this turn's call repeated (None: a new call).
    """

    tool_seconds: float | None = None
    command: str | None = None
    exit_code: int | None = None
    timed_out: bool = False
    n_actions: int = 0
    submitted: bool = False
    finish_reason: str | None = None
    echoed_job_id: str | None = None
    temperature: float | None = None
    seed: int | None = None
    repeat_of: int | None = None


@dataclass
class AgentJobRecord(JobRecord):
    """A ``JobRecord`` plus the agent's exit status, step count, submission and whether its task's check
    passed afterwards (``solved``; None when the task has no check); ``repeats`` counts its repeated calls."""

    exit_status: str = ""
    steps: int = 0
    format_errors: int = 0
    repeats: int = 0
    task: str = ""
    submission: str | None = None
    solved: bool | None = None
    verdict: str | None = None  # why the judge said solved or not (agent_engine.agent.judge.Verdict)
    task_name: str | None = None
    elided: int = 0  # messages elided or shortened to fit the context
    refused: int = 0  # prompts the server refused as too long for the context (each shrunk and sent again)
    cut_answers: int = 0  # answers cut at the token limit (their edits and commands refused)
    branch_at: int | None = None  # messages before the first call that changed the repository
    attempts: int = 1  # attempts the job ran (agent_engine.agent.attempts)
    mutants: int = 0  # mutants the rewrite stage wrote and checked (agent_engine.agent.mutants)

    def close(self) -> None:
        """The job ended: its trace counts every turn, and its JCT is set when it ended without an error."""
        self.trace_turns = self.turns
        if self.error is None and self.start_at is not None and self.end_at is not None:
            self.jct = self.end_at - self.start_at


@dataclass
class AgentJobResult:
    """One finished job: its records and the whole conversation."""

    turns: list[AgentTurnRecord]
    job: AgentJobRecord
    messages: list[dict[str, str]]
