"""py-spy stacks of our server fall in the group of their innermost engine frame."""

from __future__ import annotations

import pytest

from benchmarks.serve_profile import classify, parse_raw

pytestmark = pytest.mark.core

ENGINE = ["_run (agent_engine/server/async_engine.py:370)", "step (agent_engine/engine/llm_engine.py:173)",
          "_forward (agent_engine/model/runner.py:150)", "forward (agent_engine/model/lean_decoder.py:200)"]


@pytest.mark.parametrize(("leaf", "group"), [
    ("linear (kernels/cpu_ops.py:77)", "matmul (C++ ops)"),
    ("gate_up_silu (kernels/cpu_ops.py:99)", "matmul (C++ ops)"),
    ("paged_attention_cpu (kernels/cpu_ops.py:140)", "paged attention"),
    ("rms_norm (kernels/cpu_ops.py:50)", "norms, rotary, SiLU (C++ ops)"),
    ("_sample (agent_engine/model/sampler.py:90)", "sampler"),
])
def test_innermost_engine_frame_names_the_group(leaf: str, group: str) -> None:
    assert classify([*ENGINE, leaf]) == group
    assert classify([*ENGINE[:2], "select (selectors.py:10)"]) == "idle"


def test_raw_lines_sum_per_group() -> None:
    raw = ";".join([*ENGINE, "linear (kernels/cpu_ops.py:77)"]) + " 7\n" + ";".join(ENGINE) + " 3\n"
    assert parse_raw(raw) == {"matmul (C++ ops)": 7, "model forward": 3}
