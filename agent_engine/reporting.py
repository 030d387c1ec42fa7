"""Small helpers shared by the benchmark scripts: tables and JSON output."""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent_engine.json_types import JsonObject, JsonValue


def print_table(headers: Sequence[str], rows: Sequence[Sequence[JsonValue]]) -> str:
    """Print (and return) a plain-text table with right-aligned numbers."""

    def fmt(v: Any) -> str:
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:,.3f}" if abs(v) < 1000 else f"{v:,.1f}"
        return str(v)

    cells = [[fmt(v) for v in r] for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(headers)]
    lines = [" | ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("-+-".join("-" * w for w in widths))
    lines += [" | ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    text = "\n".join(lines)
    print(text)
    return text


def machine_info() -> JsonObject:
    """The machine a result was measured on: CPU model, the kernels' instruction-set variant (and the
    variant ``AGENT_ENGINE_ISA`` forced, under which the process routes as that variant's CPU, and the
    caps on torch's libraries in this process's environment), the CPU's vector features, AMX (listed,
    granted or set aside), core count and load average (when the report is written), Python."""
    from kernels import amx, cpp_build, isa

    flags = isa.cpu_flags()
    active = cpp_build.active_variant()
    tiles = amx.amx_state()
    return {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count(),
            "cpu_model": isa.cpu_model(), "kernel_isa": active.name if active else "none (torch path)",
            "forced_isa": forced.name if (forced := isa.forced_variant()) else None,
            "amx": {"listed": list(tiles.listed), "granted": tiles.granted, "set_aside": tiles.set_aside,
                    "why": tiles.why},
            "library_caps": isa.library_caps_set(),
            "vector_features": sorted(f for f in flags if f.startswith(("avx", "amx", "fma", "f16c", "sve", "asimd"))),
            "loadavg": list(os.getloadavg())}


def machine_line() -> str:
    """``machine_info`` in one line, printed above every benchmark table that makes a speed claim."""
    from kernels import amx, cpp_build, isa

    active = cpp_build.active_variant()
    kernels = isa.describe(active) if active else f"{isa.cpu_model()} · no C++ kernels (torch path)"
    if isa.forced_variant():
        kernels += f", forced by {isa.ENV_FORCE} (routes as that CPU)"
    return f"CPU: {kernels}, {amx.describe()}, {os.cpu_count()} cores"


def write_json(path: str | os.PathLike[str] | None, payload: JsonObject, *, quiet: bool = False) -> None:
    """Write ``payload`` to ``path`` (nothing when no path) whole or not at all: a reader, or a run
    killed mid-write, never sees half a file. Says so on stdout unless ``quiet``."""
    if not path:
        return
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")  # one per process: writers never share it
    try:
        tmp.write_text(json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n")
        os.replace(tmp, p)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if not quiet:
        print(f"wrote {p}")
