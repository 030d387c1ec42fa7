"""Scheduler overhead: microseconds per ``schedule()`` + ``update()`` step with a fake runner.

Drives the real Scheduler at 64, 256 and 1024 running requests in steady decode (prefix caching on,
requests sharing a system prompt). Target: <= 1 ms per step at 256 running requests (the Continuum
paper reports 0.96 ms per step for vLLM's scheduler).

    python -m benchmarks.scheduler_overhead --json out/scheduler_overhead.json
"""

from __future__ import annotations

import argparse
import time

from agent_engine.reporting import machine_info, print_table, write_json
from scheduler import FakeClock, FakeRunner, Request, SamplingParams, Scheduler, SchedulerConfig

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


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="64,256,1024")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--policies", default="fcfs,continuum")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    rows, results = [], {}
    for policy in args.policies.split(","):
        for n in sizes:
            us = measure(n, args.steps, policy)
            results[f"{policy}@{n}"] = {"policy": policy, "num_running": n, "us_per_step": us}
            rows.append([policy, n, us, us / n])
    print_table(["policy", "running", "us/step", "us/req"], rows)
    worst_256 = max((v["us_per_step"] for v in results.values() if v["num_running"] == 256), default=None)
    ok = worst_256 is not None and worst_256 <= TARGET_US_AT_256
    if worst_256 is not None:
        print(f"target <= {TARGET_US_AT_256:.0f} us/step at 256 running: {'PASS' if ok else 'FAIL'} "
              f"({worst_256:.0f} us)")
    payload = {"results": results, "target_us_at_256": TARGET_US_AT_256, "pass": ok, "machine": machine_info()}
    write_json(args.json, payload)
    return payload


if __name__ == "__main__":
    main()
