"""Fake OpenAI-compatible servers that play a scripted model, for the agent tests (in process, no network).

``FakeServer`` answers step ``i`` of a job (``i`` = assistant messages so far) with ``script[i]`` as
text (the text interface), ``ToolServer`` with ``script[i]`` as one tool call streamed in fragments, as
a real server streams ``delta.tool_calls``; both keep every request they got. ``run_jobs`` runs tasks
through the real runner against a ``FakeServer``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import httpx

from agent_engine.agent.job_runner import AgentRunResult, RunOptions, run_agent_jobs_sync
from agent_engine.agent.loop import AgentConfig
from agent_engine.agent.task_set import AgentTask

__all__ = ["FakeServer", "ToolServer", "answer", "run_jobs", "tool_call"]


def answer(command: str) -> str:
    """The text answer that issues ``command`` (one fenced bash block)."""
    return f"```bash\n{command}\n```"


def tool_call(name: str, **args: Any) -> dict[str, Any]:
    """An OpenAI-style tool call of ``name`` with ``args``."""
    return {"id": "call_1", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def models_card(max_model_len: int | None) -> httpx.Response:
    """``GET /models``: one model, with ``max_model_len`` when given."""
    card: dict[str, Any] = {"id": "fake", "object": "model"}
    if max_model_len is not None:
        card["max_model_len"] = max_model_len
    return httpx.Response(200, json={"object": "list", "data": [card]})


class FakeServer:
    """An in-process chat server: step ``i`` of a job (i = assistant messages so far) answers ``script[i]``."""

    def __init__(self, script: Sequence[str], max_model_len: int | None = None) -> None:
        self.script = list(script)
        self.max_model_len = max_model_len  # what GET /models reports (None: no length, as some servers)
        self.requests: list[tuple[str, str, dict[str, str], dict[str, Any] | None]] = []

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def handle(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return models_card(self.max_model_len)
        body = json.loads(request.content) if request.content else None
        self.requests.append((request.method, request.url.path, dict(request.headers), body))
        if request.method == "DELETE":
            return httpx.Response(200, json={"released": True})
        step = sum(1 for m in body["messages"] if m["role"] == "assistant")
        text = self.script[min(step, len(self.script) - 1)]
        prompt = 10 + step
        if self.max_model_len is not None:  # a context to respect: three characters a token, as code runs
            prompt = sum(len(m.get("content") or "") for m in body["messages"]) // 3
            if prompt + (body.get("max_tokens") or 0) > self.max_model_len:
                return httpx.Response(400, json={"error": {"message": f"prompt ({prompt} tokens) too long",
                                                           "code": "context_length_exceeded"}})
        usage = {"prompt_tokens": prompt, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 0}}
        if not body.get("stream"):
            return httpx.Response(200, json={"choices": [{"message": {"content": text}, "finish_reason": "stop"}],
                                             "usage": usage})
        chunks = [{"choices": [{"delta": {"content": text}, "finish_reason": "stop"}]}, {"choices": [], "usage": usage}]
        sse = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        return httpx.Response(200, text=sse, headers={"content-type": "text/event-stream"})

    def chat_bodies(self) -> list[dict[str, Any]]:
        return [b for m, _, _, b in self.requests if m == "POST" and b is not None]

    def chat_headers(self) -> list[dict[str, str]]:
        return [h for m, _, h, _ in self.requests if m == "POST"]

    def deletes(self) -> list[str]:
        return [p for m, p, _, _ in self.requests if m == "DELETE"]


class ToolServer:
    """Step ``i`` (assistant messages so far) answers ``script[i]`` as one streamed tool call."""

    def __init__(self, script: list[dict[str, Any]]) -> None:
        self.script, self.bodies = script, []

    def handle(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return models_card(None)
        if request.method == "DELETE":
            return httpx.Response(200, json={})
        body = json.loads(request.content)
        self.bodies.append(body)
        step = sum(1 for m in body["messages"] if m["role"] == "assistant")
        fn = self.script[min(step, len(self.script) - 1)]["function"]
        args = fn["arguments"]
        first = {"index": 0, "id": f"call_{step}", "type": "function", "function": {"name": fn["name"],
                                                                                    "arguments": args[:5]}}
        rest = {"index": 0, "function": {"arguments": args[5:]}}
        chunks = [{"choices": [{"delta": {"tool_calls": [first]}}]},
                  {"choices": [{"delta": {"tool_calls": [rest]}, "finish_reason": "tool_calls"}]},
                  {"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 5}}]
        sse = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        return httpx.Response(200, text=sse, headers={"content-type": "text/event-stream"})


class SequenceServer(ToolServer):
    """Answers ``script[k]`` to the ``k``-th request, whatever the conversation holds (a dropped repeat
    leaves the conversation as it was, so the step count of ``ToolServer`` would not move)."""

    def handle(self, request: httpx.Request) -> httpx.Response:
        if request.method != "POST":
            return super().handle(request)
        k = len(self.bodies)
        body = json.loads(request.content)
        fake = dict(body, messages=[{"role": "assistant"}] * k)  # ToolServer reads the step from these
        response = super().handle(httpx.Request("POST", request.url, json=fake))
        self.bodies[-1] = body
        return response


def run_jobs(tasks: list[AgentTask], server: FakeServer, **agent: Any) -> AgentRunResult:
    """Run ``tasks`` through the real runner (real sandboxes) against ``server``, two at a time."""
    options = RunOptions("http://fake", AgentConfig(**{"step_limit": 4, "max_tokens": 32, **agent}), concurrency=2,
                         command_timeout=20, progress=False, job_id_prefix="t-", transport=server.transport())
    return run_agent_jobs_sync(tasks, options)
