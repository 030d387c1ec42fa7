"""The CPU server's step budget, measured again: prefill tokens/s of one step per width, per model.

``agent-engine bench budget [--models embedded,smollm2,qwen2.5-coder-1.5b] [--repeats 2]`` loads each
model as a CPU server would (its default weight form), times a fresh prefill step of each width of
``engine.step_budget.WIDTHS`` ``--repeats`` times (each time a full measurement, as a server's first
start makes it, stored over the previous one), and prints one row per model and run: the prefill
tokens/s at each width and the budget the rule picks (the narrowest width within
``step_budget.TOLERANCE`` of the best rate per token). Writes the table to JSON with the machine it ran
on; where runs of a model pick different widths, those widths lie within the tolerance of each other.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from agent_engine.reporting import machine_info, machine_line, print_table, write_json
from benchmarks.cli import run_standalone

HELP = "the CPU server's step budget: prefill tokens/s per step width, measured on each model"
EMBEDDED = "embedded"


def add_arguments(ap: argparse.ArgumentParser) -> None:
    """Flags of ``bench budget``."""
    ap.add_argument("--models", type=lambda s: s.split(","), default=[EMBEDDED, "smollm2"],
                    help=f"models: {EMBEDDED} (the built-in one), a known name, a folder or a .gguf file "
                         f"(default {EMBEDDED},smollm2)")
    ap.add_argument("--repeats", type=int, default=2, help="measurements per model (default 2)")
    ap.add_argument("--num-kv-blocks", type=int, default=80, help="KV pool of each engine, blocks of 16 tokens "
                                                                  "(default 80: room for the widest step)")
    ap.add_argument("--json", default="out/step_budget.json", help="results JSON")


def measure_model(model: str, repeats: int, num_kv_blocks: int) -> list[dict[str, Any]]:
    """``repeats`` fresh measurements on ``model`` loaded as a CPU server loads it."""
    from agent_engine.config import EngineConfig
    from agent_engine.engine.llm_engine import LLMEngine
    from agent_engine.engine.step_budget import measured_budget, model_shape

    engine = LLMEngine(EngineConfig(model=None if model == EMBEDDED else model, device="cpu",
                                    num_kv_blocks=num_kv_blocks, max_num_batched_tokens=64))
    runs = []
    try:
        for _ in range(repeats):
            result = measured_budget(engine.runner, model_shape(engine.loaded, engine.runner), engine.max_model_len,
                                     remeasure=True)
            runs.append({"model": model, "budget": result.budget,
                         "tokens_per_s": {w: int(w) / (ms[0] / 1e3) for w, ms in result.ms.items()}})
    finally:
        engine.close()
    return runs


def run(args: argparse.Namespace) -> int:
    """Measure every model, print the table, write the JSON."""
    runs = [r for model in args.models for r in measure_model(model, args.repeats, args.num_kv_blocks)]
    widths = sorted({int(w) for r in runs for w in r["tokens_per_s"]})
    print(machine_line())
    print_table(["model", *(f"{w} tok/s" for w in widths), "budget"],
                [[r["model"], *(r["tokens_per_s"].get(str(w)) for w in widths), r["budget"]] for r in runs])
    write_json(args.json, {"runs": runs, "machine": machine_info()})
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchmarks.step_budget_bench``: the flags and run of ``agent-engine bench budget``."""
    return run_standalone("budget", argv)


if __name__ == "__main__":
    raise SystemExit(main())
