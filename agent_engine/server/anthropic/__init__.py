"""The Anthropic Messages API (``POST /v1/messages``, ``POST /v1/messages/count_tokens``).

``protocol`` (request models) -> ``convert`` (Anthropic <-> the OpenAI-style chat form) -> ``prompt``
(rendered with the chat path's tool renderer) -> ``routes`` (the ``APIRouter``) -> ``reply`` (one
``message`` body) or ``streaming`` (SSE events), both reading the output through ``call``;
``errors`` renders Anthropic error bodies. This module imports nothing, so ``server.errors`` may
import ``anthropic.errors`` without a cycle.
"""
