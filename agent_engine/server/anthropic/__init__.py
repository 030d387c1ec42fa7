"""The Anthropic Messages API (``POST /v1/messages``, ``POST /v1/messages/count_tokens``).

``schema`` (request models) -> ``convert`` (Anthropic <-> the OpenAI-style chat form) -> ``routes``
(the ``APIRouter``; prompts rendered with the chat path's tool renderer) -> ``reply`` (``MessagesCall``
and one ``message`` body) or ``streaming`` (SSE events). Error bodies are ``server.errors``'.
"""
