"""Decode on a GPU three ways, side by side on one engine: CUDA graphs, eager, and eager on the gather path.

    agent-engine bench graphs [--model DIR] [--dtype bfloat16] [--streams 1,64,256] [--repeats 2]

One ``LLM`` on CUDA runs each prompt set of each level (``--streams`` prompts submitted at once,
``--min-len``..``--max-len`` tokens, ``--max-tokens`` greedy tokens each) in every mode, the modes
taking turns on each set so each comparison ran under the same conditions:

* ``graphs``: decode steps replayed from CUDA graphs (the default engine), attention by the Triton
  paged-decode kernel;
* ``eager``: every step run op by op (``--no-cuda-graphs``), decodes through the same Triton kernel;
* ``eager-gather``: as before the kernel existed: decode rows gathered to the batch's longest table,
  one masked SDPA call.

Every mode must produce the same greedy tokens as ``graphs`` (bf16 may differ in a late token; the
share of equal sequences is reported). Prints tokens/s, milliseconds per decode token of one stream
and the speed-ups; writes JSON.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from agent_engine.config import EngineConfig
from agent_engine.reporting import machine_info, machine_line, print_table, write_json
from benchmarks.throughput import make_prompts

HELP = "CUDA: decode with CUDA graphs vs eager vs the gather path (tokens/s side by side)"
MODES = ("graphs", "eager", "eager-gather")


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--model", default=None, help="HF folder (default: the embedded model)")
    ap.add_argument("--dtype", default="bfloat16", help="float32 | bfloat16 | float16 (default bfloat16)")
    ap.add_argument("--streams", default="1,64,256", help="prompts submitted at once, per level (default 1,64,256)")
    ap.add_argument("--min-len", type=int, default=16, help="shortest prompt in tokens (default 16)")
    ap.add_argument("--max-len", type=int, default=512, help="longest prompt in tokens (default 512)")
    ap.add_argument("--max-tokens", type=int, default=128, help="tokens generated per prompt (default 128)")
    ap.add_argument("--repeats", type=int, default=2, help="timed prompt sets per level (default 2)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random prompts")
    ap.add_argument("--json", default="out/decode_graphs.json", help="results JSON")


@contextmanager
def _mode(runner: Any, graphs: Any, mode: str) -> Iterator[None]:
    """The runner set up for ``mode`` while inside; restored after."""
    triton = importlib.import_module("kernels.triton_decode")
    saved = triton.triton_available
    runner.graphs = graphs if mode == "graphs" else None
    if mode == "eager-gather":
        triton.triton_available = lambda: False
    try:
        yield
    finally:
        triton.triton_available = saved
        runner.graphs = graphs


def _timed(llm: Any, prompts: list[list[int]], sp: Any) -> tuple[float, list[list[int]]]:
    import torch

    torch.cuda.synchronize()
    t0 = time.perf_counter()
    outs = llm.generate([{"prompt_token_ids": p} for p in prompts], sp, use_tqdm=False)
    seconds = time.perf_counter() - t0
    return seconds, [list(o.outputs[0].token_ids) for o in outs]


def run(args: argparse.Namespace) -> int:
    import torch

    from agent_engine import LLM, SamplingParams
    from benchmarks.throughput import resolve_bench_model

    if not torch.cuda.is_available():
        raise ValueError("bench graphs compares CUDA graphs with eager steps: it needs a CUDA device")
    levels = [int(x) for x in args.streams.split(",")]
    if min(levels) < 1 or args.repeats < 1:
        raise ValueError("--streams must be positive counts and --repeats >= 1")
    model_dir = resolve_bench_model(args.model)
    from transformers import AutoConfig

    vocab = AutoConfig.from_pretrained(model_dir).vocab_size
    config = EngineConfig(model=model_dir, dtype=args.dtype, device="cuda", max_num_seqs=max(levels),
                          max_num_batched_tokens=4096, max_model_len=args.max_len + args.max_tokens + 16,
                          gpu_memory_utilization=0.6, enable_prefix_caching=False)
    llm = LLM(config=config)
    runner = llm.engine.runner
    graphs = runner.graphs
    assert graphs is not None, "the engine on CUDA builds its decode graphs"
    sp = SamplingParams(temperature=0, max_tokens=args.max_tokens, ignore_eos=True)
    warmed = graphs.warm_up(max(levels), -(-config.max_model_len // config.block_size))
    rows, results = [], []
    for level in levels:
        sets = [make_prompts(level, args.min_len, args.max_len, vocab, args.seed + 100 * level + r)
                for r in range(args.repeats + 1)]
        times: dict[str, list[float]] = {m: [] for m in MODES}
        same: dict[str, list[bool]] = {m: [] for m in MODES}
        for k, prompts in enumerate(sets):  # set 0 warms every mode up (and captures the graphs)
            tokens = {}
            for mode in MODES:
                with _mode(runner, graphs, mode):
                    seconds, tokens[mode] = _timed(llm, prompts, sp)
                if k:
                    times[mode].append(seconds)
                    same[mode] += [a == b for a, b in zip(tokens[mode], tokens["graphs"], strict=True)]
        generated = level * args.max_tokens
        tok_s = {m: generated / statistics.median(times[m]) for m in MODES}
        rows.append([level, *(tok_s[m] for m in MODES), tok_s["graphs"] / tok_s["eager"],
                     tok_s["graphs"] / tok_s["eager-gather"], 1000 * level / tok_s["graphs"],
                     1000 * level / tok_s["eager-gather"],
                     " / ".join(f"{sum(same[m])}/{len(same[m])}" for m in MODES[1:])])
        results.append({"streams": level, "tok_s": tok_s, "seconds": times,
                        "same_tokens": {m: sum(same[m]) / len(same[m]) for m in MODES}})
    print(machine_line())
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {args.dtype}, prompts of {args.min_len}-"
          f"{args.max_len} tokens, {args.max_tokens} new tokens each, median of {args.repeats} sets per mode; "
          f"decode graphs captured ahead: {warmed}, in all: {graphs.captured}")
    print_table(["streams", "graphs tok/s", "eager tok/s", "eager-gather tok/s", "graphs / eager",
                 "graphs / gather", "ms/token/stream graphs", "ms/token/stream gather",
                 "same tokens eager / gather"], rows)
    write_json(args.json, {"model": model_dir, "dtype": args.dtype, "max_tokens": args.max_tokens,
                           "prompt_lens": [args.min_len, args.max_len], "repeats": args.repeats,
                           "device_name": torch.cuda.get_device_name(), "torch": torch.__version__,
                           "levels": results, "graphs_captured": graphs.captured, "machine": machine_info()})
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.decode_graphs``: the flags and run of ``agent-engine bench graphs``."""
    from benchmarks.cli import run_standalone

    return run_standalone("graphs", argv)


if __name__ == "__main__":
    raise SystemExit(main())
