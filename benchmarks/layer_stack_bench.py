"""Decode two ways, taking turns on the same prompts: a step's layers in one C++ call against the
layer loop, or (``--pages``) a GGUF's blocks in huge pages against the file mapping.

    agent-engine bench stack [--models smollm2,qwen2.5-coder-1.5b] [--streams 1,8] [--repeats 3] [--pages]

Per model, each prompt set (``--streams`` prompts of ``--prompt-len`` tokens submitted at once,
``--max-tokens`` greedy tokens each) runs in both modes, the order alternating by set:

* default: one ``LLM`` (its own defaults: a GGUF model from its quantized blocks, a float32 one on its
  panels) with the decoder's ``LayerStack`` (``kernels.layer_stack``: the engine's default) and with it
  set aside (the kernels called one by one from Python);
* ``--pages``: two ``LLM`` of a GGUF model, ``gguf_weights="native"`` (the blocks copied into
  transparent huge pages: ``kernels.huge_pages``) and ``"mapped"`` (the memory-mapped file).

Reported per model and stream count: the median milliseconds of a decode step (the steps between the
prefill and the last, every stream decoding, timed around ``LLMEngine.step``), the ratio, and
whether both modes generated the same tokens (they must: either pair runs the same kernels on the
same bytes). Prints the CPU, its kernel variant and the machine's load; writes JSON.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from agent_engine.reporting import machine_info, machine_line, print_table, write_json

HELP = ("CPU decode: a step's layers in one C++ call vs the Python layer loop, or GGUF blocks in huge pages vs "
        "the file mapping (ms per step, side by side)")
STACK_MODES = ("stack", "loop")
PAGE_MODES = ("huge pages", "file mapping")


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--models", default="smollm2,qwen2.5-coder-1.5b",
                    help="comma list of models (named, .gguf or HF folders, 'embedded' for the default model; "
                         "default smollm2,qwen2.5-coder-1.5b)")
    ap.add_argument("--streams", default="1,8", help="prompts decoding at once, per level (default 1,8)")
    ap.add_argument("--prompt-len", type=int, default=64, help="prompt tokens (default 64)")
    ap.add_argument("--max-tokens", type=int, default=64, help="tokens generated per prompt (default 64)")
    ap.add_argument("--repeats", type=int, default=3, help="prompt sets per level and mode (default 3)")
    ap.add_argument("--pages", action="store_true",
                    help="compare GGUF blocks in huge pages (gguf_weights native) with the file mapping (mapped)")
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


def _stack_modes(llm: Any) -> dict[str, tuple[Any, Callable[[], None]]]:
    """Mode -> (engine, set-up): one engine with its layer stack, and with it set aside."""
    lean = llm.engine.runner.lean
    if lean is None or lean.stack is None:
        raise ValueError("this engine has no layer stack (needs the lean CPU decoder with the C++ kernels and "
                         "every matmul on quantized blocks or panels)")
    stack = lean.stack

    def use(on: bool) -> Callable[[], None]:
        return lambda: setattr(lean, "stack", stack if on else None)

    return {"stack": (llm.engine, use(True)), "loop": (llm.engine, use(False))}


def _page_modes(model: str, max_seqs: int) -> dict[str, tuple[Any, Callable[[], None]]]:
    """Mode -> (engine, set-up): the GGUF's blocks in huge pages, and on the file mapping."""
    from agent_engine import LLM

    modes = {}
    for mode, weights in zip(PAGE_MODES, ("native", "mapped"), strict=True):
        llm = LLM(model=model, gguf_weights=weights, max_num_seqs=max_seqs, enable_prefix_caching=False)
        if llm.engine.runner.lean is None or not llm.engine.runner.lean.layers[0].quant:
            raise ValueError(f"{model}: --pages compares a GGUF model's quantized blocks; this one has none")
        modes[mode] = (llm.engine, lambda: None)
    return modes


def _level(modes: dict[str, tuple[Any, Callable[[], None]]], streams: int, args: argparse.Namespace,
           vocab: int) -> dict[str, Any]:
    import torch

    from agent_engine import SamplingParams

    names = list(modes)
    budget = modes[names[0]][0].config.token_budget
    if streams * args.prompt_len > budget:  # _decode_steps drops one prefill step, not a chunked prefill
        raise ValueError(f"{streams} prompts of {args.prompt_len} tokens do not fit one step's {budget} tokens")
    sp = SamplingParams(temperature=0, max_tokens=args.max_tokens, ignore_eos=True)
    gen = torch.Generator().manual_seed(streams)
    step_ms: dict[str, list[float]] = {m: [] for m in names}
    same = []
    for r in range(args.repeats + 1):  # set 0 warms both modes up
        prompts = [torch.randint(10, vocab - 10, (args.prompt_len,), generator=gen).tolist() for _ in range(streams)]
        tokens = {}
        for mode in names if r % 2 == 0 else names[::-1]:
            engine, set_up = modes[mode]
            set_up()
            steps, tokens[mode] = _decode_steps(engine, prompts, sp, f"{mode}-{streams}-{r}")
            if r:
                step_ms[mode].append(1e3 * statistics.median(steps))
        same.append(tokens[names[0]] == tokens[names[1]])
    modes[names[0]][1]()  # the engine's default again
    return {"streams": streams, "step_ms": step_ms, "same_tokens": all(same)}


def run(args: argparse.Namespace) -> int:
    from agent_engine import LLM
    from agent_engine.machine_load import LoadMonitor

    levels = [int(x) for x in args.streams.split(",")]
    if min(levels) < 1 or args.repeats < 1 or args.prompt_len < 1 or args.max_tokens < 4:
        raise ValueError("--streams must be positive, --repeats and --prompt-len >= 1, --max-tokens >= 4")
    results, rows = [], []
    names = PAGE_MODES if args.pages else STACK_MODES
    monitor = LoadMonitor().start()
    for model in args.models.split(","):
        if args.pages:
            modes = _page_modes(model, max(levels))
        else:
            modes = _stack_modes(LLM(model=None if model == "embedded" else model, max_num_seqs=max(levels),
                                     enable_prefix_caching=False))
        vocab = next(iter(modes.values()))[0].runner.lean.vocab_rows
        for streams in levels:
            level = _level(modes, streams, args, vocab)
            new_ms, old_ms = (statistics.median(level["step_ms"][m]) for m in names)
            rows.append([model, streams, old_ms, new_ms, old_ms / new_ms, level["same_tokens"]])
            results.append({"model": model, **level, "speedup": old_ms / new_ms})
        del modes
    load = monitor.stop()
    print(machine_line())
    print_table(["model", "streams", f"{names[1]} ms/step", f"{names[0]} ms/step", f"{names[1]} / {names[0]}",
                 "same tokens"], rows)
    print(f"machine during the runs: {load.label()}")
    write_json(args.json, {"modes": list(names), "prompt_len": args.prompt_len, "max_tokens": args.max_tokens,
                           "repeats": args.repeats, "results": results, "load": load.as_dict(),
                           "machine": machine_info()})
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.layer_stack_bench``: the flags and run of ``agent-engine bench stack``."""
    from benchmarks.cli import run_standalone

    return run_standalone("stack", argv)


if __name__ == "__main__":
    raise SystemExit(main())
