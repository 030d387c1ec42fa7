"""OpenAI-compatible HTTP server around one ``LLMEngine`` (FastAPI + uvicorn).

Layout: ``async_engine`` (the single engine thread and per-request async queues), ``protocol``
(request models), ``errors`` (OpenAI-style error bodies), ``metrics`` (Prometheus), ``app`` (routes),
``serve`` (the ``agent-engine serve`` command). Heavy imports (torch) happen only when an engine is built.
"""

from agent_engine.server.async_engine import AsyncEngine, EngineDeadError, RequestGroup, RequestSpec

__all__ = ["AsyncEngine", "EngineDeadError", "RequestGroup", "RequestSpec"]
