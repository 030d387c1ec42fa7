"""agent-engine: a paged-KV LLM serving engine for agent workloads.

``from agent_engine import LLM, SamplingParams`` for offline generation; ``agent-engine serve`` for
the OpenAI-compatible server. Heavy modules (torch, transformers) load lazily on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_engine.malloc_settings import tune_malloc
from agent_engine.thread_wait import default_bounded_spin

default_bounded_spin()  # before anything loads torch (and with it libgomp)
tune_malloc()  # before any thread allocates

from scheduler.job_hints import JobHints  # noqa: E402
from scheduler.sampling_params import SamplingParams  # noqa: E402
from scheduler.structured import StructuredSpec  # noqa: E402

if TYPE_CHECKING:
    from agent_engine.config import EngineConfig
    from agent_engine.engine.llm import LLM
    from agent_engine.engine.llm_engine import LLMEngine
    from agent_engine.engine.outputs import CompletionOutput, RequestOutput

__all__ = [
    "LLM", "CompletionOutput", "EngineConfig", "JobHints", "LLMEngine", "RequestOutput", "SamplingParams",
    "StructuredSpec",
]

_LAZY = {
    "LLM": "agent_engine.engine.llm",
    "LLMEngine": "agent_engine.engine.llm_engine",
    "EngineConfig": "agent_engine.config",
    "RequestOutput": "agent_engine.engine.outputs",
    "CompletionOutput": "agent_engine.engine.outputs",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(name)
