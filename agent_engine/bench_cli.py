"""``agent-engine bench jct | jct-load | ttl-sweep | timeline``: argument parsing and dispatch only.

``register_bench(bench_subparsers)`` adds the four commands to the existing ``bench`` group of
``agent_engine.cli`` (whose ``add_subparsers`` action it receives). Invariants: the benchmark
modules are imported only when a command runs (``agent-engine --help`` stays light); every command
sets ``func`` (called as ``args.func(args)``, returns the exit status).
"""

from __future__ import annotations

import argparse

__all__ = ["register_bench"]


def _jct(args: argparse.Namespace) -> int:
    from benchmarks.jct import run_jct

    return run_jct(args)


def _load(args: argparse.Namespace) -> int:
    from benchmarks.jct_load import run_load

    return run_load(args)


def _sweep(args: argparse.Namespace) -> int:
    from benchmarks.ttl_sweep import run_sweep

    return run_sweep(args)


def _timeline(args: argparse.Namespace) -> int:
    from benchmarks.sched_timeline import run_timeline

    return run_timeline(args)


def register_bench(bench_subparsers: argparse._SubParsersAction) -> None:
    """Add ``jct``, ``jct-load``, ``ttl-sweep`` and ``timeline`` to the ``bench`` subcommand group."""
    from benchmarks.jct import add_jct_args
    from benchmarks.jct_load import add_load_args
    from benchmarks.sched_timeline import add_timeline_args
    from benchmarks.ttl_sweep import add_sweep_args

    for name, add, fn, helptext in (
        ("jct", add_jct_args, _jct, "job completion time per scheduling policy (fresh server each)"),
        ("jct-load", add_load_args, _load, "mean JCT vs job arrival rate per policy"),
        ("ttl-sweep", add_sweep_args, _sweep, "CONTINUUM TTL settings: JCT and pinned block-seconds"),
        ("timeline", add_timeline_args, _timeline, "PNG timeline of a --sched-trace JSONL"),
    ):
        p = bench_subparsers.add_parser(name, help=helptext, description=helptext)
        add(p)
        p.set_defaults(func=fn)
