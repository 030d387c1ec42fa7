"""Where a step's time goes: offline (phase timers + torch.profiler by op) and under N-way serving (py-spy).

    python -m benchmarks.profile_step [--mode offline|serve|both] [--model DIR] [--concurrency 8]

Offline: the ``bench throughput`` workload (prompts of ``--min-len``..``--max-len`` tokens, ``--max-tokens``
greedy tokens each) on our ``LLM``; every phase of ``LLMEngine.step`` is timed by wrapping the method
that implements it (scheduler, attention metadata, model forward, sampler, scheduler update, output
processing, of which detokenization), and a few decode steps run under ``torch.profiler`` for the
forward's ops. Serving: our server under ``--concurrency`` streaming clients while ``py-spy`` samples
every thread; samples are grouped by what the innermost engine frame was doing (``serve_profile``).
Prints the tables and writes JSON.

Invariant: wrappers only time, they never change arguments or results, and are removed afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from agent_engine.config import EngineConfig
from agent_engine.reporting import machine_info, print_table, write_json
from benchmarks.throughput import make_prompts, offline_engine_config

ENGINE_FLAGS = ("dtype", "device", "cuda_graphs")  # EngineConfig's, with its defaults (offline mode)
ENGINE_DEFAULTS: dict[str, object] = {}

OP_GROUPS = (  # (group, substrings of a profiler op name), first match wins
    ("matmul (linear)", ("aten::mm", "aten::addmm", "aten::linear", "aten::matmul", "aten::bmm", "small_linear",
                         "panel_linear", "_linear_pointwise")),
    ("paged attention", ("paged_attention", "scaled_dot_product", "_softmax", "index_select")),
    ("rms_norm", ("rms_norm", "aten::rsqrt", "aten::pow", "aten::mean")),
    ("silu * up", ("silu", "aten::mul")),
    ("rotary + KV write", ("rotary_and_cache", "index_copy", "aten::cat", "aten::neg")),
    ("embedding", ("embedding",)),
)


@contextlib.contextmanager
def phase_timers(pairs: Sequence[tuple[Any, str, str]], totals: Counter[str]) -> Iterator[None]:
    """Wrap ``getattr(obj, name)`` for each ``(obj, name, phase)``: its wall time adds to ``totals[phase]``."""
    saved = []
    for obj, name, phase in pairs:
        fn = getattr(obj, name)
        saved.append((obj, name, obj.__dict__.get(name) if hasattr(obj, "__dict__") else None))

        def timed(*a: Any, _fn: Callable[..., Any] = fn, _phase: str = phase, **k: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return _fn(*a, **k)
            finally:
                totals[_phase] += time.perf_counter() - t0

        setattr(obj, name, timed)
    try:
        yield
    finally:
        for obj, name, old in reversed(saved):
            if old is None:
                delattr(obj, name)
            else:
                setattr(obj, name, old)


def _phases(engine: Any) -> list[tuple[Any, str, str]]:
    import agent_engine.model.runner as runner_mod
    from agent_engine.engine.detokenizer import IncrementalDetokenizer

    runner = engine.runner
    pairs = [(engine.scheduler, "schedule", "scheduler.schedule"), (runner_mod, "build_attention_metadata",
             "attention metadata"), (runner, "_forward", "model forward (incl. metadata)"),
             (runner.sampler, "sample", "sampler"), (engine.scheduler, "update", "scheduler.update"),
             (engine, "_process", "output processing (incl. detok)"),
             (IncrementalDetokenizer, "push", "detokenization"), (engine, "step", "step (total)")]
    return pairs


def offline_profile(args: argparse.Namespace) -> dict[str, Any]:
    """Phase totals of the whole run and the forward's op table over a few decode steps."""
    import torch

    from agent_engine import LLM, SamplingParams

    # The model as named (a GGUF is then served as the server would: from its own blocks).
    llm = LLM(config=offline_engine_config(args, ENGINE_FLAGS, args.model, args.num_prompts))
    prompts = make_prompts(args.num_prompts, args.min_len, args.max_len, llm.engine.vocab_size, args.seed)
    sp = SamplingParams(temperature=0, max_tokens=args.max_tokens, ignore_eos=True)
    llm.generate([{"prompt_token_ids": p} for p in prompts[:4]], sp, use_tqdm=False)  # warm-up
    totals: Counter[str] = Counter()
    t0 = time.perf_counter()
    with phase_timers(_phases(llm.engine), totals):
        llm.generate([{"prompt_token_ids": p} for p in prompts], sp, use_tqdm=False)
    wall = time.perf_counter() - t0
    ops = _decode_op_profile(llm, prompts, sp, torch)
    return {"wall_s": wall, "tok_s": len(prompts) * args.max_tokens / wall, "phases_s": dict(totals), "ops": ops,
            "lean_decoder": getattr(llm.engine.runner, "lean", None) is not None}


def _decode_op_profile(llm: Any, prompts: list[list[int]], sp: Any, torch: Any) -> dict[str, Any]:
    """Self host (and on a GPU, device) seconds per op group over 8 steady decode steps of all prompts."""
    from torch.profiler import ProfilerActivity, profile

    engine = llm.engine
    gpu = engine.runner.device.type == "cuda"
    for i, p in enumerate(prompts):
        engine.add_request(engine.make_request(f"prof-{i}", {"prompt_token_ids": p}, sp))
    while engine.scheduler.waiting or any(r.num_computed_tokens < r.num_prompt_tokens
                                          for r in engine.scheduler.running):
        engine.step()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])
    with profile(activities=activities) as prof:
        for _ in range(8):
            engine.step()
    engine.abort([f"prof-{i}" for i in range(len(prompts))])
    groups: Counter[str] = Counter()
    device_groups: Counter[str] = Counter()
    for ev in prof.key_averages():
        name = ev.key
        group = next((g for g, keys in OP_GROUPS if any(k in name for k in keys)), "other ops")
        groups[group] += ev.self_cpu_time_total / 1e6 / 8
        device_groups[group] += getattr(ev, "self_device_time_total", 0.0) / 1e6 / 8
    return {"per_step_s": dict(groups), "device_per_step_s": dict(device_groups) if gpu else None,
            "batch": len(prompts)}


def _report_offline(res: dict[str, Any]) -> None:
    wall = res["wall_s"]
    print(f"offline: {res['tok_s']:.1f} tok/s, {wall:.2f} s wall, lean decoder: {res['lean_decoder']}")
    rows = [[k, v, 100 * v / wall] for k, v in sorted(res["phases_s"].items(), key=lambda kv: -kv[1])]
    print_table(["phase", "seconds", "% of wall"], rows)
    ops = res["ops"]["per_step_s"]
    total = sum(ops.values()) or 1.0
    device = res["ops"].get("device_per_step_s") or {}
    print(f"forward ops per decode step ({res['ops']['batch']} running; host time, and device time on a GPU):")
    print_table(["op group", "host ms/step", "%", "device ms/step"],
                [[k, v * 1e3, 100 * v / total, device.get(k, 0.0) * 1e3 if device else None]
                 for k, v in sorted(ops.items(), key=lambda kv: -kv[1])])


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--mode", choices=("offline", "serve", "both"), default="both")
    ap.add_argument("--model", default=None, help="HF folder, .gguf file or named model (default: embedded)")
    ap.add_argument("--num-prompts", type=int, default=32)
    ap.add_argument("--min-len", type=int, default=16)
    ap.add_argument("--max-len", type=int, default=512)
    ap.add_argument("--max-tokens", type=int, default=64)
    EngineConfig.add_arguments(ap, ENGINE_FLAGS, ENGINE_DEFAULTS, title="engine options (offline mode)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random prompts")
    ap.add_argument("--concurrency", type=int, default=8, help="streaming clients while serving")
    ap.add_argument("--serve-seconds", type=float, default=20.0, help="py-spy sampling time")
    ap.add_argument("--json", default="out/profile_step.json")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.profile_step", description=__doc__.split("\n")[0])
    add_arguments(ap)
    args = ap.parse_args(argv)
    payload: dict[str, Any] = {"machine": machine_info(), "loadavg_before": os.getloadavg()}
    if args.mode in ("offline", "both"):
        payload["offline"] = offline_profile(args)
        _report_offline(payload["offline"])
    if args.mode in ("serve", "both"):
        from benchmarks.serve_profile import report_serve, serve_profile

        payload["serve"] = serve_profile(args)
        report_serve(payload["serve"])
    payload["loadavg_after"] = os.getloadavg()
    print(f"load average before / after: {payload['loadavg_before'][0]:.2f} / {payload['loadavg_after'][0]:.2f}")
    write_json(args.json, payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
