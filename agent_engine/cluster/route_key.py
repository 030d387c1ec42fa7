"""The routing key of an HTTP request: its job (the server's own hint precedence) and its prompt's
prefix chain.

``route_key(body, headers)`` reads the job exactly as the replica will (``server.hints.resolve_job``:
every session convention, one precedence, never reimplemented here) and chains the prompt's text
(``routing.prefix.text_chain``), so a request without any job hint still lands where the previous
turn of its conversation ran. The text is the prompt of a completion, or the system prompt and the
messages of a chat (OpenAI) or messages (Anthropic) call, each message as ``role`` and content.

Invariants: pure and total: a body that is not JSON, or a bad hint, gives a key without a job (the
replica then answers the 400 itself); only the first ``max_chunks`` chunks are hashed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from agent_engine.json_types import JsonValue
from agent_engine.routing import RouteKey, text_chain
from agent_engine.server.hints import resolve_job

MAX_CHUNKS = 4096  # 1 MiB of prompt text at 256 characters a chunk


def route_key(body: bytes, headers: Mapping[str, str], max_chunks: int = MAX_CHUNKS) -> RouteKey:
    """The job and prefix chain of a request body (``headers``: lower-case names)."""
    try:
        parsed = json.loads(body) if body else None
    except (ValueError, UnicodeDecodeError):
        return RouteKey()
    if not isinstance(parsed, dict):
        return RouteKey()
    try:
        job_id, _ = resolve_job(parsed, headers)
    except ValueError:
        job_id = None
    return RouteKey(job_id, text_chain(prompt_text(parsed), limit=max_chunks))


def prompt_text(body: Mapping[str, JsonValue]) -> str:
    """The prompt text a request's prefix is read from ('' when it has none)."""
    prompt = body.get("prompt")
    if prompt is not None:
        return _prompt(prompt)
    parts = []
    system = body.get("system")
    if system is not None:
        parts.append(f"<system>{_content(system)}\n")
    messages = body.get("messages")
    if isinstance(messages, list):
        for m in messages:
            if isinstance(m, Mapping):
                parts.append(f"<{m.get('role')}>{_content(m.get('content'))}\n")
    return "".join(parts)


def _prompt(prompt: JsonValue) -> str:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and prompt and all(isinstance(t, int) for t in prompt):
        return ",".join(map(str, prompt))  # token ids: a stable text of them
    if isinstance(prompt, list) and prompt:
        return _prompt(prompt[0])  # a batch: routed by its first prompt
    return ""


def _content(content: JsonValue) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") if isinstance(p, Mapping) and isinstance(p.get("text"), str)
                       else json.dumps(p, sort_keys=True, default=str) for p in content)
    return json.dumps(content, sort_keys=True, default=str)
