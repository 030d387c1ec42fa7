"""OpenAI-compatible HTTP server around one ``LLMEngine`` (FastAPI + uvicorn).

Layout, from the engine up:
- ``engine_like``: ``EngineLike``, exactly what the server uses of the engine, and its final account.
- ``groups``: request groups and their events (asyncio side), the live-request table (engine side);
  ``async_engine``: the one way in (``RequestSpec``s prepared into the engine's ``EngineRequest``s),
  the single engine thread and its queue of typed commands; ``grammar_compiles``: a group's output
  constraints compiled on a fair pool before it reaches that thread.
- ``server_config``: ``ServerConfig``, the start-up options and their flags.
- ``hints`` (a request's job and scheduling hints), ``auth`` (API keys and tenants), ``request_limits`` and
  ``edge_middleware`` (body size and value checks at the edge), ``errors`` (OpenAI and Anthropic error bodies), ``metrics``
  (Prometheus), ``state`` (what handlers share).
- The OpenAI API: ``openai_schema`` (request models), ``openai_call`` (one call and its body
  formatting), ``openai_reply`` (one JSON body or SSE), ``openai_routes`` (the handlers, also health,
  metrics, models and job release). ``anthropic/`` is the Messages API; ``tools/`` tool calling.
- ``app`` (``build_app``, the middlewares and the SIGTERM drain), ``serve`` (the ``agent-engine serve``
  command), ``launcher`` (start a server subprocess and scrape it).

Importing the package, ``server_config`` or ``serve`` is light; fastapi loads with ``app``, torch only
when an engine is built.
"""

from agent_engine.server.async_engine import AsyncEngine, EngineDeadError, EngineStoppedError, RequestSpec
from agent_engine.server.engine_like import EngineLike
from agent_engine.server.groups import RequestGroup
from agent_engine.server.server_config import ServerConfig

__all__ = [
    "AsyncEngine", "EngineDeadError", "EngineLike", "EngineStoppedError", "RequestGroup", "RequestSpec",
    "ServerConfig",
]
