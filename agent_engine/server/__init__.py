"""OpenAI-compatible HTTP server around one ``LLMEngine`` (FastAPI + uvicorn).

Layout, from the engine up:
- ``groups``: request specs, request groups (asyncio side) and the live-request table (engine side).
- ``async_engine``: the single engine thread and its command queue.
- ``config``: ``ServerConfig``, the start-up options and their flags.
- ``protocol`` (request models), ``responses`` (pure response formatting), ``errors`` (OpenAI-style
  error bodies), ``metrics`` (Prometheus).
- ``state`` (what handlers share), ``call`` (one API call), ``respond`` (non-streamed answers),
  ``streaming`` (SSE), ``routes`` (the handlers), ``app`` (``build_app`` and the API-key middleware).
- ``serve``: the ``agent-engine serve`` command; ``launcher``: start a server subprocess and scrape it.

Importing the package, ``config`` or ``serve`` is light; fastapi loads with ``app``, torch only when an
engine is built.
"""

from agent_engine.server.async_engine import AsyncEngine, EngineDeadError, EngineStoppedError
from agent_engine.server.config import ServerConfig
from agent_engine.server.groups import RequestGroup, RequestSpec

__all__ = [
    "AsyncEngine", "EngineDeadError", "EngineStoppedError", "RequestGroup", "RequestSpec", "ServerConfig",
]
