"""The per-phase roofline accounting of the throughput benchmark: what each step computed and read."""

from __future__ import annotations

import pytest

from agent_engine import LLM, SamplingParams
from benchmarks.phase_roofline import ModelCosts, PhaseMeter, phase_rows

pytestmark = pytest.mark.core


def test_meter_counts_each_phase_from_the_steps_shapes() -> None:
    """One 10-token prompt, 3 new tokens: a prefill step (10 rows, 55 causal pairs, 1 sampled row) and
    two decode steps (contexts 11 and 12); FLOPs and bytes follow the stated formulas exactly."""
    llm = LLM(num_kv_blocks=64, max_model_len=256)
    costs = ModelCosts.of(llm.engine.runner)
    model = llm.engine.runner.model
    assert costs.layer_matmul_params == sum(
        m.weight.numel() for m in model.get_decoder().layers.modules() if hasattr(m, "in_features"))
    meter = PhaseMeter(costs)
    llm.engine.step_listeners.append(meter)
    sp = SamplingParams(temperature=0, max_tokens=3, ignore_eos=True)
    llm.generate([{"prompt_token_ids": list(range(3, 13))}], sp, use_tqdm=False)
    attn = 4.0 * costs.num_layers * costs.num_q_heads * costs.head_dim
    kv_row = 2.0 * costs.num_layers * costs.num_kv_heads * costs.head_dim * costs.kv_itemsize
    prefill, decode = meter.totals["prefill"], meter.totals["decode"]
    assert (prefill["steps"], prefill["tokens"], decode["steps"], decode["tokens"]) == (1, 10, 2, 2)
    assert prefill["flops"] == 2.0 * (costs.layer_matmul_params * 10 + costs.head_params) + attn * 55
    assert decode["flops"] == 2.0 * 2 * (costs.layer_matmul_params + costs.head_params) + attn * (11 + 12)
    assert decode["bytes"] == 2 * costs.weight_bytes + kv_row * (11 + 12)
    rows = phase_rows(meter, {"matmul_gflops": 100.0, "read_gbs": 10.0})
    assert [r["phase"] for r in rows] == ["prefill", "decode"]
    for r, t in zip(rows, (prefill, decode), strict=True):
        assert r["gflops"] == pytest.approx(t["flops"] / t["seconds"] / 1e9)
        assert r["flops_share"] == pytest.approx(r["gflops"] / 100.0)
        assert r["bandwidth_share"] == pytest.approx(r["gbs"] / 10.0)
