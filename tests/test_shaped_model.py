"""``make-model --like``: a random checkpoint with a known model's layer shape loads and generates."""

from __future__ import annotations

import argparse
import json

import pytest

from agent_engine.cli import make_model
from agent_engine.sim.shaped_model import build_shaped_model
from agent_engine.sim.specs import get_model

pytestmark = pytest.mark.core


def test_shaped_checkpoint_has_the_spec_layers_and_runs(tmp_path) -> None:
    from agent_engine import LLM, SamplingParams

    spec = get_model("default")
    out = build_shaped_model(tmp_path / "m", spec, dtype="float32")
    config = json.loads((out / "config.json").read_text())
    assert (config["hidden_size"], config["num_hidden_layers"], config["num_attention_heads"],
            config["num_key_value_heads"], config["head_dim"], config["intermediate_size"]) == (
        spec.hidden_size, spec.num_layers, spec.num_heads, spec.num_kv_heads, spec.head_dim,
        spec.intermediate_size)
    llm = LLM(model=str(out), num_kv_blocks=64, max_model_len=256)
    sp = SamplingParams(temperature=0, max_tokens=3, ignore_eos=True)
    first = llm.generate([{"prompt_token_ids": [5, 6, 7]}], sp, use_tqdm=False)[0].outputs[0].token_ids
    assert len(first) == 3
    again = build_shaped_model(tmp_path / "n", spec, dtype="float32")  # seeded: the same weights
    assert (again / "model.safetensors").read_bytes() == (out / "model.safetensors").read_bytes()


def test_bad_shape_requests_are_value_errors(tmp_path) -> None:
    with pytest.raises(ValueError, match="dtype"):
        build_shaped_model(tmp_path, get_model("default"), dtype="float16")
    args = argparse.Namespace(dir=str(tmp_path), like="no-such-model", dtype="bfloat16", device="cpu")
    with pytest.raises(ValueError, match="unknown model"):
        make_model.run(args)
