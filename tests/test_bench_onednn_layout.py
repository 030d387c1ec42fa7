"""``agent-engine bench onednn-layout``: every route timed per shape, dtype and row count, JSON written."""

from __future__ import annotations

import json

import pytest

from benchmarks.cli import run_standalone
from kernels import cpp_build, load_cpu_ops
from kernels.linear_routes import onednn_has


@pytest.mark.skipif(not load_cpu_ops(), reason=f"C++ kernels unavailable: {cpp_build.load_error()}")
def test_a_small_run_times_every_route(tmp_path) -> None:
    out = tmp_path / "layout.json"
    assert run_standalone("onednn-layout", ["--shapes", "48x32", "--rows", "1,5", "--repeats", "1",
                                            "--json", str(out)]) == 0
    results = json.loads(out.read_text())["results"]
    dtypes = ["float32"] + (["bfloat16"] if onednn_has("bfloat16") else [])
    assert [(r["dtype"], r["rows"]) for r in results] == [(d, m) for d in dtypes for m in (1, 5)]
    assert all(ms > 0 for r in results for ms in r["ms"].values())


def test_a_malformed_shape_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="NxK"):
        run_standalone("onednn-layout", ["--shapes", "48by32"])
