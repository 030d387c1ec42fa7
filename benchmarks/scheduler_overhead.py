"""Scheduler overhead: microseconds per ``schedule()`` + ``update()`` step with a fake runner.

Drives the real Scheduler at 64, 256 and 1024 running requests in steady decode (prefix caching on,
requests sharing a system prompt). Target: <= 1 ms per step at 256 running requests (the Continuum
paper reports 0.96 ms per step for vLLM's scheduler).

    agent-engine bench scheduler          (or python -m benchmarks.scheduler_overhead)
"""

from __future__ import annotations

import argparse
import time

from tqdm import tqdm

from agent_engine.reporting import machine_info, print_table, write_json
from benchmarks.plots import plot_series
from scheduler import FakeClock, FakeRunner, Request, SamplingParams, Scheduler, SchedulerConfig
from scheduler.policy import POLICY_NAMES

TARGET_US_AT_256 = 1000.0


def measure(num_running: int, steps: int, policy: str = "fcfs", block_size: int = 16,
            prompt_len: int = 256) -> float:
    """Mean microseconds per decode step with ``num_running`` requests all running."""
    max_tokens = steps + 64
    blocks_per_req = (prompt_len + max_tokens) // block_size + 2
    cfg = SchedulerConfig(
        num_blocks=num_running * blocks_per_req + 1, block_size=block_size, max_num_seqs=num_running,
        max_num_batched_tokens=max(8192, num_running * prompt_len), max_model_len=prompt_len + max_tokens + 1,
        policy=policy,
    )
    clock = FakeClock()
    s = Scheduler(cfg, clock=clock)
    runner = FakeRunner()
    system = list(range(1, 129))  # a shared 128-token system prompt hits the prefix cache
    sp = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True)
    for i in range(num_running):
        user = [(i * 7919 + k) % 30000 + 200 for k in range(prompt_len - len(system))]
        s.add_request(Request(f"r{i}", system + user, sp, block_size=block_size, arrival_time=0.0,
                              job_id=f"j{i}", job_arrival_time=0.0))
    while len(s.running) < num_running or any(r.num_computed_tokens < r.num_prompt_tokens for r in s.running):
        out = s.schedule()
        s.update(out, runner.execute(out))
    t0 = time.perf_counter()
    for _ in range(steps):
        out = s.schedule()
        s.update(out, runner.execute(out))
        clock.advance(0.01)
    dt = time.perf_counter() - t0
    assert len(s.running) == num_running, "requests finished during the measurement"
    return dt / steps * 1e6


HELP = "scheduler time per step with a fake runner"


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--sizes", default="64,256,1024", help="running requests per measurement")
    ap.add_argument("--steps", type=int, default=200, help="decode steps timed per measurement")
    ap.add_argument("--policies", default="fcfs,continuum", help=f"comma list of {', '.join(POLICY_NAMES)}")
    ap.add_argument("--json", default="out/scheduler_overhead.json")
    ap.add_argument("--plot", default="out/scheduler_overhead.png")
    ap.add_argument("--no-progress", action="store_true")


def run(args: argparse.Namespace) -> int:
    """Measure every (policy, size), print the table and the target, write JSON and the plot."""
    sizes = [int(x) for x in args.sizes.split(",")]
    points = [(p, n) for p in args.policies.split(",") for n in sizes]
    results = {}
    for policy, n in tqdm(points, desc="scheduler overhead", disable=args.no_progress):
        results[f"{policy}@{n}"] = {"policy": policy, "num_running": n, "us_per_step": measure(n, args.steps, policy)}
    rows = [[v["policy"], v["num_running"], v["us_per_step"], v["us_per_step"] / v["num_running"]]
            for v in results.values()]
    print_table(["policy", "running", "us/step", "us/req"], rows)
    worst_256 = max((v["us_per_step"] for v in results.values() if v["num_running"] == 256), default=None)
    ok = worst_256 is not None and worst_256 <= TARGET_US_AT_256
    if worst_256 is not None:
        print(f"target <= {TARGET_US_AT_256:.0f} us/step at 256 running: {'PASS' if ok else 'FAIL'} "
              f"({worst_256:.0f} us)")
    write_json(args.json, {"results": results, "target_us_at_256": TARGET_US_AT_256, "pass": ok,
                           "machine": machine_info()})
    series = {p: ([n for n in sizes], [results[f"{p}@{n}"]["us_per_step"] for n in sizes])
              for p in args.policies.split(",")}
    print(f"wrote {plot_series(args.plot, 'scheduler time per step', series, 'running requests', 'us / step', logx=True)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.scheduler_overhead ...`` (same flags as ``agent-engine bench scheduler``)."""
    ap = argparse.ArgumentParser(prog="agent-engine bench scheduler", description=HELP)
    add_arguments(ap)
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
