"""Structured outputs: every constrained output parses and validates, and unconstrained requests
sharing the batch keep their speed.

    agent-engine bench structured [--model smollm2] [--requests 1000] [--repeats 3]

Validity: a server subprocess on ``--model`` answers ``--requests`` seeded requests (sampled at
temperature 1, several prompts), a mix of ``tool_choice`` "required", named and a ``strict`` tool on
``/v1/chat/completions``, ``response_format`` ``json_schema``, and Anthropic ``tool_choice`` "any" /
"tool" on ``/v1/messages``. Each answer is a call (or a JSON document) that must parse and validate
against its schema (``jsonschema``); an answer cut by ``max_tokens`` is counted apart (it is honestly
reported as ``length`` / ``max_tokens``, never as a call). Target: 0 invalid.

Throughput: in one process, the same batch twice per repeat, alternating: ``--batch`` unconstrained
requests plus ``--companions`` more that are unconstrained in the baseline and JSON-constrained in the
other run (all run exactly ``--max-tokens`` tokens). The unconstrained requests' tokens/s of the two
runs give ``ratio = mixed / baseline`` (median over repeats). Target: ratio >= 0.97.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent_engine.reporting import machine_info, print_table, write_json
from benchmarks.cli import run_standalone
from benchmarks.structured_load import validity_run

HELP = "structured outputs: 0 invalid constrained outputs; unconstrained tokens/s beside constrained ones"
TARGET_INVALID = 0
TARGET_RATIO = 0.97
# Companions' constraint: long enough that none ends before --max-tokens.
LONG_SCHEMA = {"type": "object", "properties": {"items": {"type": "array", "minItems": 400, "items": {
    "type": "object", "properties": {"path": {"type": "string", "pattern": "^[a-z]{1,6}[.]py$"},
                                     "line": {"type": "integer", "minimum": 1, "maximum": 999}},
    "required": ["path", "line"], "additionalProperties": False}}}, "required": ["items"]}


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--model", default=None, help="model (default: the embedded one; smollm2, qwen2.5-coder-0.5b, "
                                                  "a .gguf file or a folder)")
    ap.add_argument("--requests", type=int, default=1000, help="seeded constrained requests (0: skip validity)")
    ap.add_argument("--concurrency", type=int, default=16, help="requests in flight during the validity run")
    ap.add_argument("--max-tokens", type=int, default=64, help="tokens per request in the throughput runs")
    ap.add_argument("--call-max-tokens", type=int, default=256, help="max_tokens of each validity request")
    ap.add_argument("--batch", type=int, default=16, help="unconstrained requests per throughput run (0: skip)")
    ap.add_argument("--companions", type=int, default=8, help="requests constrained in the mixed run")
    ap.add_argument("--repeats", type=int, default=3, help="baseline/mixed pairs")
    ap.add_argument("--prompt-len", type=int, default=64, help="prompt tokens of each throughput request")
    ap.add_argument("--startup-timeout", type=float, default=600.0, help="seconds for the server to get healthy")
    ap.add_argument("--json", default="out/structured_bench.json", help="results JSON")
    ap.add_argument("--log-dir", default="out/logs", help="server log folder")


def throughput_pairs(model: str | None, args: argparse.Namespace) -> list[dict[str, float]]:
    """Baseline and mixed runs, alternating; unconstrained tokens/s of each and their ratio."""
    from agent_engine.config import EngineConfig
    from agent_engine.engine.llm_engine import LLMEngine
    from benchmarks.throughput import make_prompts
    from scheduler import SamplingParams, StructuredSpec

    n = args.batch + args.companions
    engine = LLMEngine(EngineConfig(model=model, max_num_seqs=max(n, 8), seed=0,
                                    max_model_len=args.prompt_len + args.max_tokens + 16))
    prompts = make_prompts(n * (2 * args.repeats + 1), args.prompt_len, args.prompt_len, engine.vocab_size - 8, 1)
    free = SamplingParams(temperature=0.0, max_tokens=args.max_tokens, ignore_eos=True)
    constrained = SamplingParams(temperature=0.0, max_tokens=args.max_tokens,
                                 structured=StructuredSpec.json(LONG_SCHEMA))
    engine.structured.compile(constrained.structured)  # compile once, outside the timings
    _run(engine, prompts[:n], [free] * n)  # warm-up
    pairs = []
    for r in range(args.repeats):
        batch = prompts[n * (2 * r + 1): n * (2 * r + 3)]
        base = _run(engine, batch[:n], [free] * n, args.batch)
        mixed = _run(engine, batch[n:], [free] * args.batch + [constrained] * args.companions, args.batch)
        pairs.append({"baseline_tok_s": base, "mixed_tok_s": mixed, "ratio": mixed / base})
    return pairs


def _run(engine: Any, prompts: list[list[int]], params: list[Any], timed: int | None = None) -> float:
    """Run a batch to the end; tokens/s of its first ``timed`` requests (until the last of them ends)."""
    ids = [f"r{time.monotonic_ns()}-{i}" for i in range(len(prompts))]
    for rid, prompt, p in zip(ids, prompts, params, strict=True):
        engine.add_request(engine.make_request(rid, prompt, p))
    watched, tokens, t0, t_end = set(ids[:timed or len(ids)]), 0, time.perf_counter(), 0.0
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.finished and out.request_id in watched:
                tokens += len(out.outputs[0].token_ids)
                watched.discard(out.request_id)
                if not watched:
                    t_end = time.perf_counter()
    return tokens / max(t_end - t0, 1e-9)


def run(args: argparse.Namespace) -> int:
    from benchmarks.throughput import resolve_bench_model

    model = resolve_bench_model(args.model) if args.model else None
    payload: dict[str, Any] = {"machine": machine_info(), "model": args.model or "embedded", "args": vars(args)}
    ok = True
    if args.requests > 0:
        validity = validity_run(model, args, Path(args.log_dir))
        payload["validity"] = validity
        rows = [[kind, c["requests"], c["valid"], c["cut"], c["invalid"]] for kind, c in validity["by_kind"].items()]
        rows.append(["all", validity["requests"], validity["valid"], validity["cut"], validity["invalid"]])
        print_table(["kind", "requests", "valid", "cut by max_tokens", "invalid"], rows)
        passed = validity["invalid"] <= TARGET_INVALID
        ok &= passed
        print(f"target: {TARGET_INVALID} invalid of {validity['requests']}: {'PASS' if passed else 'FAIL'}"
              f" ({validity['invalid']} invalid); examples: {validity['examples'][:3]}")
    if args.batch > 0:
        pairs = throughput_pairs(model, args)
        ratio = statistics.median(p["ratio"] for p in pairs)
        payload["throughput"] = {"pairs": pairs, "median_ratio": ratio}
        print_table(["repeat", "baseline tok/s", "mixed tok/s", "ratio"],
                    [[i, p["baseline_tok_s"], p["mixed_tok_s"], p["ratio"]] for i, p in enumerate(pairs)])
        passed = ratio >= TARGET_RATIO
        ok &= passed
        print(f"target: unconstrained tok/s ratio >= {TARGET_RATIO} with {args.companions} constrained "
              f"companions: {'PASS' if passed else 'FAIL'} ({ratio:.3f})")
    write_json(args.json, payload)
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.structured_bench``: the same flags as ``agent-engine bench structured``."""
    return run_standalone("structured", argv)


if __name__ == "__main__":
    raise SystemExit(main())
