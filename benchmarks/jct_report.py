"""``bench jct``'s verdicts and table: the checks of CONTINUUM against FCFS, per run and per round.

Invariants: a check whose policies were not run is ``None`` ("SKIP"), never a PASS; the checks are
printed, never asserted here (targets live in the benchmark, not in tests);
``excess_over_unlimited_s`` = mean JCT - ``unlimited``'s mean JCT.
"""

from __future__ import annotations

from typing import Any

from agent_engine.reporting import print_table
from benchmarks.jct_config import HINTS_SEP


def checks_per_round(rows: dict[str, dict[str, Any]]) -> list[dict[str, dict[str, Any]]]:
    """``compute_checks`` on each round's mean JCTs (empty for a single round)."""
    per = {n: r.get("rounds_mean_jct_s") for n, r in rows.items()}
    if not per or not all(per.values()):
        return []
    k = min(len(v) for v in per.values())  # type: ignore[arg-type]
    return [compute_checks({n: {"mean_jct_s": v[i]} for n, v in per.items()}) for i in range(k)]


def _check(value: float | None, ok: bool | None, desc: str, threshold: str) -> dict[str, Any]:
    return {"pass": ok, "value": value, "threshold": threshold, "desc": desc}


def compute_checks(rows: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The acceptance checks of CONTINUUM against FCFS over mean JCTs; ``pass`` is None where a policy
    is missing."""

    def mean(n: str) -> float | None:
        return (rows.get(n) or {}).get("mean_jct_s")

    fcfs, cont, unl, fixed = mean("fcfs"), mean("continuum"), mean("unlimited"), mean("continuum-fixed")
    out: dict[str, dict[str, Any]] = {}
    ratio = cont / fcfs if fcfs and cont is not None else None
    out["continuum_vs_fcfs"] = _check(ratio, None if ratio is None else ratio <= 0.6,
                                      "continuum mean JCT / fcfs mean JCT", "<= 0.6")
    removed = None
    if fcfs is not None and cont is not None and unl is not None and fcfs - unl > 0:
        removed = (fcfs - cont) / (fcfs - unl)
    out["excess_removed"] = _check(removed, None if removed is None else removed >= 0.7,
                                   "(fcfs - continuum) / (fcfs - unlimited)", ">= 0.7")
    pf = cont / fixed if fixed and cont is not None else None
    out["paper_vs_fixed"] = _check(pf, None if pf is None else pf <= 1.05,
                                   "continuum (paper) mean JCT / continuum-fixed mean JCT", "<= 1.05")
    hint_free = mean(f"continuum{HINTS_SEP}none")
    hf = hint_free / cont if cont and hint_free is not None else None
    out["hint_free_jct"] = _check(hf, None if hf is None else hf <= 1.10,
                                  "continuum without hints mean JCT / with job_id hints", "<= 1.10")
    reuse, reuse_free = (rows.get(n, {}).get("prefix_hit_ratio") for n in ("continuum", f"continuum{HINTS_SEP}none"))
    rr = reuse_free / reuse if reuse and reuse_free is not None else None
    out["hint_free_reuse"] = _check(rr, None if rr is None else rr >= 0.90,
                                    "continuum without hints prefix hit ratio / with job_id hints", ">= 0.90")
    return out


def format_check(c: dict[str, Any]) -> str:
    """One line: PASS, FAIL or SKIP, the measured value and the threshold."""
    status = "SKIP" if c["pass"] is None else ("PASS" if c["pass"] else "FAIL")
    val = "-" if c["value"] is None else f"{c['value']:.3f}"
    return f"{status}  {c['desc']} = {val} (want {c['threshold']})"


TABLE_COLS = (("policy", None), ("mean JCT", "mean_jct_s"), ("p50", "p50_jct_s"), ("p90", "p90_jct_s"),
              ("p99", "p99_jct_s"), ("jobs/min", "jobs_per_min"), ("queue s", "mean_queue_s"),
              ("hit ratio", "prefix_hit_ratio"), ("prefill tok", "prefill_tokens"),
              ("preempt", "preemptions"), ("excess s", "excess_over_unlimited_s"), ("srv cpu s", "server_cpu_s"),
              ("wall s", "wall_s"))


def print_results(rows: dict[str, dict[str, Any]], checks: dict[str, dict[str, Any]]) -> str:
    """The JCT table, the pin counters and the checks, printed; returns the text."""
    table = print_table([c for c, _ in TABLE_COLS],
                        [[name] + [row.get(k) for _, k in TABLE_COLS[1:]] for name, row in rows.items()])
    lines = [table]
    for name, row in rows.items():
        if row.get("pins"):
            line = f"pins[{name}]: " + ", ".join(f"{k}={v}" for k, v in row["pins"].items())
            print(line)
            lines.append(line)
    for c in checks.values():
        print(format_check(c))
        lines.append(format_check(c))
    return "\n".join(lines)
