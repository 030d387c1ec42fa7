"""``agent-engine bench tile-routes``: every route of each shape timed, absent ones marked, JSON written."""

from __future__ import annotations

import json

import pytest

from benchmarks.cli import run_standalone
from benchmarks.tile_routes import BF16_SHAPES, GGUF_SHAPES
from kernels import cpp_build, load_cpu_ops
from kernels.amx import tiles_ready


@pytest.mark.skipif(not load_cpu_ops(), reason=f"C++ kernels unavailable: {cpp_build.load_error()}")
def test_a_small_run_times_every_route_this_cpu_has(tmp_path) -> None:
    out = tmp_path / "routes.json"
    assert run_standalone("tile-routes", ["--rows", "4", "--repeats", "1", "--json", str(out)]) == 0
    results = json.loads(out.read_text())["results"]
    assert len(results) == len(GGUF_SHAPES) + len(BF16_SHAPES)
    for r in results:
        times = r["seconds"]
        assert times["tiles"] is None if not tiles_ready() else times["tiles"] > 0
        assert times["int8" if r["kind"] == "gguf" else "panels"] > 0  # the route every build has
