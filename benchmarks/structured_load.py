"""The validity half of ``bench structured``: seeded constrained requests against a server, each answer
parsed and validated.

Invariants: request ``i`` is the same for a given ``--requests`` whatever the concurrency (its kind,
prompt and seed follow from ``i``); an answer is ``valid`` (a call of an offered tool, or a JSON
document, that validates), ``cut`` (finish ``length`` / ``max_tokens``: reported as such, with no call)
or ``invalid`` (anything else: no call where one was forced, a call that does not parse or validate, an
HTTP error); every invalid answer keeps an example.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import jsonschema
from tqdm import tqdm

from agent_engine.server.launcher import start_engine_server

# Positive character classes: xgrammar 0.2.8 lets free strings and negated classes ([^\n]) take
# UTF-8-encoded surrogates, which decode to U+FFFD (a random model emits them; see docs/structured-outputs.md).
TEXT = "[A-Za-z0-9 ,.:;_()+=*/<>'-]"
CMD = {"type": "object", "properties": {"command": {"type": "string", "pattern": "^[a-z0-9 ./_-]{1,40}$"}},
       "required": ["command"], "additionalProperties": False}
VIEW = {"type": "object", "properties": {"path": {"type": "string", "pattern": "^[a-z_/]{1,20}[.]py$"},
                                         "line": {"type": "integer", "minimum": 1, "maximum": 9999}},
        "required": ["path"], "additionalProperties": False}
EDIT = {"type": "object", "properties": {"path": {"type": "string", "pattern": "^[a-z_/]{1,20}[.]py$"},
                                         "old": {"type": "string", "pattern": f"^{TEXT}{{1,40}}$"},
                                         "new": {"type": "string", "pattern": f"^{TEXT}{{0,40}}$"}},
        "required": ["path", "old", "new"], "additionalProperties": False}
SCHEMAS = {"bash": CMD, "view_file": VIEW, "edit_file": EDIT}
TOOLS = [{"type": "function", "function": {"name": "bash", "description": "Run a shell command.", "parameters": CMD}},
         {"type": "function", "function": {"name": "view_file", "description": "Show a file.", "parameters": VIEW}},
         {"type": "function", "function": {"name": "edit_file", "description": "Replace text in a file.",
                                           "parameters": EDIT, "strict": True}}]
VERDICT = {"type": "object", "properties": {"solved": {"type": "boolean"},
                                            "reason": {"type": "string", "pattern": f"^{TEXT}{{1,60}}$"},
                                            "next": {"enum": ["test", "edit", "submit"]}},
           "required": ["solved", "reason", "next"], "additionalProperties": False}
PROMPTS = ["calc.py: add(a, b) returns a - b. Fix it.", "Run the tests and show me what fails.",
           "Open ranges.py and look at count_up.", "The config key timeout is misspelled in settings.py.",
           "List the files in the repository."]
KINDS = ("required", "named", "strict", "json_schema", "anthropic_any", "anthropic_tool")


def request_of(i: int, model: str, max_tokens: int) -> tuple[str, str, dict[str, Any]]:
    """Request ``i``: its kind, path and body."""
    kind = KINDS[i % len(KINDS)]
    user = [{"role": "user", "content": PROMPTS[(i // len(KINDS)) % len(PROMPTS)]}]
    common = {"model": model, "max_tokens": max_tokens, "seed": i, "temperature": 1.0}
    if kind.startswith("anthropic"):
        tools = [{"name": t["function"]["name"], "description": t["function"]["description"],
                  "input_schema": t["function"]["parameters"]} for t in TOOLS]
        choice = {"type": "any"} if kind == "anthropic_any" else {"type": "tool", "name": "view_file"}
        return kind, "/v1/messages", {**common, "messages": user, "tools": tools, "tool_choice": choice}
    if kind == "json_schema":
        fmt = {"type": "json_schema", "json_schema": {"name": "verdict", "schema": VERDICT, "strict": True}}
        return kind, "/v1/chat/completions", {**common, "messages": user, "response_format": fmt}
    choice: Any = {"required": "required", "named": {"type": "function", "function": {"name": "bash"}},
                   "strict": {"type": "function", "function": {"name": "edit_file"}}}[kind]
    return kind, "/v1/chat/completions", {**common, "messages": user, "tools": TOOLS, "tool_choice": choice}


def judge(kind: str, status: int, body: dict[str, Any]) -> tuple[str, str]:
    """``(verdict, why)`` of one answer: valid, cut or invalid."""
    if status != 200:
        return "invalid", f"HTTP {status}: {str(body)[:200]}"
    try:
        if kind.startswith("anthropic"):
            if body["stop_reason"] == "max_tokens":
                return "cut", ""
            [use] = [b for b in body["content"] if b["type"] == "tool_use"]
            jsonschema.validate(use["input"], SCHEMAS[use["name"]])
            return "valid", ""
        choice = body["choices"][0]
        if choice["finish_reason"] == "length":
            return "cut", ""
        if kind == "json_schema":
            jsonschema.validate(json.loads(choice["message"]["content"]), VERDICT)
            return "valid", ""
        [call] = choice["message"]["tool_calls"]
        jsonschema.validate(json.loads(call["function"]["arguments"]), SCHEMAS[call["function"]["name"]])
        return "valid", ""
    except (KeyError, TypeError, ValueError, jsonschema.ValidationError) as exc:
        return "invalid", f"{type(exc).__name__}: {str(exc)[:120]} in {json.dumps(body)[:300]}"


async def _all(base_url: str, model: str, args: argparse.Namespace) -> list[tuple[str, str, str]]:
    sem = asyncio.Semaphore(args.concurrency)
    bar = tqdm(total=args.requests, desc="structured requests")
    async with httpx.AsyncClient(base_url=base_url, timeout=600) as client:
        async def one(i: int) -> tuple[str, str, str]:
            kind, path, body = request_of(i, model, args.call_max_tokens)
            async with sem:
                r = await client.post(path, json=body)
            bar.update()
            verdict, why = judge(kind, r.status_code, r.json())
            return kind, verdict, why

        results = await asyncio.gather(*(one(i) for i in range(args.requests)))
    bar.close()
    return list(results)


def validity_run(model: str | None, args: argparse.Namespace, log_dir: Path) -> dict[str, Any]:
    """Start a server on ``model``, send the requests, count the verdicts (overall and per kind)."""
    engine_args = ["--max-num-seqs", str(max(8, args.concurrency)), "--seed", "0"]
    if model is not None:
        engine_args += ["--model", model]
    log_dir.mkdir(parents=True, exist_ok=True)
    with start_engine_server(engine_args, log_dir / "structured_bench.log", startup_timeout=args.startup_timeout) as srv:
        served = httpx.get(srv.base_url + "/v1/models", timeout=30).json()["data"][0]["id"]
        results = asyncio.run(_all(srv.base_url, served, args))
    counts = Counter(v for _, v, _ in results)
    by_kind = {k: {"requests": 0, "valid": 0, "cut": 0, "invalid": 0} for k in KINDS}
    for kind, verdict, _ in results:
        by_kind[kind]["requests"] += 1
        by_kind[kind][verdict] += 1
    return {"requests": len(results), "valid": counts["valid"], "cut": counts["cut"], "invalid": counts["invalid"],
            "by_kind": by_kind, "examples": [why for _, v, why in results if v == "invalid"][:10]}
