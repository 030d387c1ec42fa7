"""Decode with a step's layers in one C++ call against the layer loop, side by side on one engine.

    agent-engine bench stack [--models smollm2,qwen2.5-coder-1.5b] [--streams 1,8] [--repeats 3]

Per model one ``LLM`` (its own defaults: a GGUF model from its quantized blocks, a float32 one on
its panels) runs each prompt set (``--streams`` prompts of ``--prompt-len`` tokens submitted at once,
``--max-tokens`` greedy tokens each) twice, taking turns: with the decoder's ``LayerStack``
(``kernels.layer_stack``: the engine's default) and with it set aside (the kernels called one by one
from Python). Reported per model and stream count: the median milliseconds of a decode step (steps
with every stream decoding, timed around ``LLMEngine.step``), the speed-up, and whether both modes
generated the same tokens (they must: the op is the loop's kernels bit for bit). Prints the CPU,
its kernel variant and the machine's load; writes JSON.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from typing import Any

from agent_engine.reporting import machine_info, machine_line, print_table, write_json

HELP = "CPU decode: a step's layers in one C++ call vs the Python layer loop (ms per step, side by side)"
MODES = ("stack", "loop")


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--models", default="smollm2,qwen2.5-coder-1.5b",
                    help="comma list of models (named, .gguf or HF folders, 'embedded' for the default model; "
                         "default smollm2,qwen2.5-coder-1.5b)")
    ap.add_argument("--streams", default="1,8", help="prompts decoding at once, per level (default 1,8)")
    ap.add_argument("--prompt-len", type=int, default=64, help="prompt tokens (default 64)")
    ap.add_argument("--max-tokens", type=int, default=64, help="tokens generated per prompt (default 64)")
    ap.add_argument("--repeats", type=int, default=3, help="prompt sets per level and mode (default 3)")
    ap.add_argument("--json", default="out/layer_stack.json", help="results JSON")


def _decode_steps(engine: Any, prompts: list[list[int]], sp: Any, tag: str) -> tuple[list[float], list[list[int]]]:
    """Seconds of every step in which all of ``prompts`` decode, and the tokens generated."""
    ids = [f"{tag}-{i}" for i in range(len(prompts))]
    for rid, p in zip(ids, prompts, strict=True):
        engine.add_request(engine.make_request(rid, {"prompt_token_ids": p}, sp))
    steps, tokens = [], {rid: [] for rid in ids}
    while engine.has_unfinished_requests():
        t0 = time.perf_counter()
        outs = engine.step()
        seconds = time.perf_counter() - t0
        for out in outs:
            tokens[out.request_id] = list(out.outputs[0].token_ids)
        steps.append(seconds)
    # The first step prefills every prompt (one budget holds them), the last one ends every request
    # (all generate --max-tokens): the steps between decode all streams.
    return steps[1:-1], [tokens[rid] for rid in ids]


def _level(llm: Any, streams: int, args: argparse.Namespace, vocab: int) -> dict[str, Any]:
    import torch

    from agent_engine import SamplingParams

    lean = llm.engine.runner.lean
    stack = lean.stack
    sp = SamplingParams(temperature=0, max_tokens=args.max_tokens, ignore_eos=True)
    gen = torch.Generator().manual_seed(streams)
    step_ms: dict[str, list[float]] = {m: [] for m in MODES}
    same = []
    for r in range(args.repeats + 1):  # set 0 warms both modes up
        prompts = [torch.randint(10, vocab - 10, (args.prompt_len,), generator=gen).tolist() for _ in range(streams)]
        tokens = {}
        for mode in MODES if r % 2 == 0 else MODES[::-1]:
            lean.stack = stack if mode == "stack" else None
            steps, tokens[mode] = _decode_steps(llm.engine, prompts, sp, f"{mode}-{streams}-{r}")
            if r:
                step_ms[mode].append(1e3 * statistics.median(steps))
        lean.stack = stack
        same.append(tokens["stack"] == tokens["loop"])
    return {"streams": streams, "step_ms": step_ms, "same_tokens": all(same)}


def run(args: argparse.Namespace) -> int:
    from agent_engine import LLM
    from agent_engine.machine_load import LoadMonitor

    levels = [int(x) for x in args.streams.split(",")]
    if min(levels) < 1 or args.repeats < 1 or args.prompt_len < 1 or args.max_tokens < 4:
        raise ValueError("--streams must be positive, --repeats and --prompt-len >= 1, --max-tokens >= 4")
    results, rows = [], []
    monitor = LoadMonitor().start()
    for model in args.models.split(","):
        llm = LLM(model=None if model == "embedded" else model, max_num_seqs=max(levels), enable_prefix_caching=False)
        lean = llm.engine.runner.lean
        if lean is None or lean.stack is None:
            raise ValueError(f"{model}: this engine has no layer stack (needs the lean CPU decoder with the C++ "
                             "kernels and every matmul on quantized blocks or panels)")
        for streams in levels:
            level = _level(llm, streams, args, lean.vocab_rows)
            stack_ms, loop_ms = (statistics.median(level["step_ms"][m]) for m in MODES)
            rows.append([model, streams, loop_ms, stack_ms, loop_ms / stack_ms, level["same_tokens"]])
            results.append({"model": model, **level, "speedup": loop_ms / stack_ms})
        del llm
    load = monitor.stop()
    print(machine_line())
    print_table(["model", "streams", "loop ms/step", "stack ms/step", "loop / stack", "same tokens"], rows)
    print(f"machine during the runs: {load.label()}")
    write_json(args.json, {"prompt_len": args.prompt_len, "max_tokens": args.max_tokens, "repeats": args.repeats,
                           "results": results, "load": load.as_dict(), "machine": machine_info()})
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.layer_stack_bench``: the flags and run of ``agent-engine bench stack``."""
    from benchmarks.cli import run_standalone

    return run_standalone("stack", argv)


if __name__ == "__main__":
    raise SystemExit(main())
