"""A step's decoder layers in one C++ call (``kernels.layer_stack``) == the lean decoder's layer loop,
bit for bit: float32 and bfloat16 panels, GGUF blocks (Llama and Qwen2 with its QKV biases), prefill
chunks, prefix hits and decodes in one batch; the steps it cannot take run the loop; a malformed plan
is refused."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
import torch
from gguf_helpers import write_tiny_llama_gguf
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from agent_engine import LLM
from agent_engine.model.runner import ModelRunner
from kernels import layer_stack
from kernels.cpp_build import load_cpu_ops, ops
from kernels.linear_routes import LinearForm

pytestmark = [pytest.mark.core,
              pytest.mark.skipif(not load_cpu_ops(), reason="the C++ CPU kernels did not build")]

BLOCK = 4
TINY = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=256)
Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 = 2, 3, 6, 7, 8
GGUF_TYPES = {"attn_q": Q8_0, "attn_k": Q4_0, "attn_v": Q5_0, "attn_output": Q4_1, "ffn_gate": Q5_1,
              "ffn_up": Q5_1, "ffn_down": Q4_0, "output": Q8_0, "token_embd": Q8_0}
# (query lengths, context lengths, block tables) per step: two prompts in chunks (the second step a
# prefix hit of 4 cached tokens for the third request), then decodes of all three.
STEPS = [([10, 7], [0, 0], [[3, 7, 1], [5, 4]]),
         ([9, 1, 5], [10, 7, 4], [[3, 7, 1, 12, 9], [5, 4], [3, 6, 11]]),
         ([1, 1, 1], [19, 8, 9], [[3, 7, 1, 12, 9], [5, 4, 10], [3, 6, 11]]),
         ([1, 1, 1], [20, 9, 10], [[3, 7, 1, 12, 9, 2], [5, 4, 10], [3, 6, 11]])]


def _tiny(kind: str, dtype: torch.dtype) -> torch.nn.Module:
    torch.manual_seed(0)
    cls, cfg = (Qwen2ForCausalLM, Qwen2Config) if kind == "qwen2" else (LlamaForCausalLM, LlamaConfig)
    return cls(cfg(**TINY, attn_implementation="sdpa")).to(dtype).eval()


def _all_in_cpp(monkeypatch: pytest.MonkeyPatch, panels_from: int = 10**9, sdpa_from: int = 10**9) -> None:
    """Routes fixed for the test, not by this CPU's calibration: float32 matmuls on panels below
    ``panels_from`` rows (oneDNN from there), attention chunks in C++ below ``sdpa_from`` tokens."""
    def form(_weight: torch.Tensor, rows: int, gated: bool = False, logits: bool = False) -> LinearForm:  # noqa: ARG001
        return LinearForm.PANELS if rows < panels_from else LinearForm.ONEDNN

    monkeypatch.setattr(layer_stack, "linear_form", form)
    monkeypatch.setattr("kernels.cpu_ops.linear_form", form)  # the loop's choice, the same
    paged = importlib.import_module("kernels.paged_attention")  # the module, not its function of that name
    monkeypatch.setattr(paged, "SDPA_MIN_FRESH_QUERY", sdpa_from)
    monkeypatch.setattr(paged, "SDPA_MIN_CONTEXT_QUERY", sdpa_from)


def _counting_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the stack's runs (the list grows by one per run)."""
    runs: list[int] = []
    real = layer_stack.LayerStack.run

    def run(self: layer_stack.LayerStack, *args: object, **kwargs: object) -> None:
        runs.append(1)
        real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(layer_stack.LayerStack, "run", run)
    return runs


def _logits(runner: ModelRunner, stacked: bool) -> list[torch.Tensor]:
    """Every step's logits at every row, with the stack on or off (fresh caches, same steps)."""
    lean = runner.lean
    assert lean is not None and lean.stack is not None
    stack, lean.stack = lean.stack, (lean.stack if stacked else None)
    for k, v in runner.kv_caches:
        k.zero_()
        v.zero_()
    out = []
    for qlens, ctx, tables in STEPS:
        tokens = torch.randint(0, 128, (sum(qlens),), generator=torch.Generator().manual_seed(sum(ctx))).tolist()
        out.append(runner._forward(tokens, qlens, ctx, tables, list(range(sum(qlens)))).clone())
    lean.stack = stack
    return out


def _assert_stack_is_the_loop(runner: ModelRunner, runs: list[int], steps_stacked: int = len(STEPS)) -> None:
    loop = _logits(runner, stacked=False)
    assert not runs
    stacked = _logits(runner, stacked=True)
    assert len(runs) == steps_stacked
    for a, b in zip(stacked, loop, strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize(("kind", "dtype"), [("llama", torch.float32), ("qwen2", torch.float32),
                                             ("llama", torch.bfloat16)])
def test_panels_stack_is_the_layer_loop_bit_for_bit(kind: str, dtype: torch.dtype,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    runner = ModelRunner(_tiny(kind, dtype), num_kv_blocks=16, block_size=BLOCK)
    assert runner.lean is not None and runner.lean.stack is not None
    _all_in_cpp(monkeypatch)
    _assert_stack_is_the_loop(runner, _counting_runs(monkeypatch))


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_gguf_blocks_stack_is_the_layer_loop_bit_for_bit(arch: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_ENGINE_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "tiny.gguf"
    write_tiny_llama_gguf(path, arch=arch, quant=GGUF_TYPES)
    runner = LLM(model=str(path), num_kv_blocks=16, block_size=BLOCK, max_model_len=48).engine.runner
    assert runner.lean is not None and runner.lean.layers[0].quant
    _all_in_cpp(monkeypatch)
    _assert_stack_is_the_loop(runner, _counting_runs(monkeypatch))


@pytest.mark.parametrize("refuse", ["matmul", "attention"])
def test_steps_the_op_cannot_take_run_the_layer_loop(refuse: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A matmul that oneDNN takes from 8 rows, or attention chunks of 8 tokens for SDPA: the steps
    with 8 rows or more run the loop (and give its results), the decodes of 3 rows the stack."""
    runner = ModelRunner(_tiny("llama", torch.float32), num_kv_blocks=16, block_size=BLOCK)
    _all_in_cpp(monkeypatch, **({"panels_from": 8} if refuse == "matmul" else {"sdpa_from": 8}))
    _assert_stack_is_the_loop(runner, _counting_runs(monkeypatch), steps_stacked=2)


def test_a_malformed_plan_or_buffer_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    runner = ModelRunner(_tiny("llama", torch.float32), num_kv_blocks=16, block_size=BLOCK)
    _all_in_cpp(monkeypatch)
    stack = runner.lean.stack if runner.lean is not None else None
    assert stack is not None
    plan = stack.plan(1)
    assert plan is not None
    t = torch.zeros(1, 64)
    cache = runner.kv_caches[0][0]
    args = [t, t.clone(), t.clone(), torch.zeros(1, 128), t.clone(), torch.zeros(1, 256), torch.zeros(1, 128),
            stack.norms, stack.eps, stack.qkv_bias, stack.weights, stack.qtypes]
    tail = [torch.ones(1, 16), torch.zeros(1, 16), [cache, cache], [cache, cache], torch.zeros(1, dtype=torch.long),
            torch.ones(1, 1, dtype=torch.int32), torch.tensor([0, 1], dtype=torch.int32),
            torch.ones(1, dtype=torch.int32), torch.zeros(1, dtype=torch.int32), 0.25, 4, 2]
    for bad, message in (([*plan[:-2]], "two ints"), ([9, *plan[1:]], "unknown route"),
                         ([plan[0], plan[1] + 1, *plan[2:]], "one panel tensor"),
                         ([int(layer_stack.Route.PANELS_SILU), *plan[1:]], "only the gate/up")):
        with pytest.raises(RuntimeError, match=message):
            ops().decoder_layers(*args, bad, *tail)
    for i, bad_buffer, message in ((2, torch.zeros(1, 32), "h must be"), (6, torch.zeros(1, 128, 2), "act must be"),
                                   (5, torch.zeros(1, 100), "gate_up must be")):
        with pytest.raises(RuntimeError, match=message):  # refused before anything is written
            ops().decoder_layers(*args[:i], bad_buffer, *args[i + 1 :], plan, *tail)
    bad_tail = [torch.ones(2, 16), *tail[1:]]
    with pytest.raises(RuntimeError, match="cos and sin"):
        ops().decoder_layers(*args, plan, *bad_tail)


def test_the_panel_tiles_are_routes_of_the_stack(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the measured route of a float32 or bfloat16 weight is the AMX tiles on its panels, the plan
    names them (6; 7 for the gate/up matmul with its SiLU, which writes the activation) instead of
    handing the step to the loop."""
    runner = ModelRunner(_tiny("llama", torch.float32), num_kv_blocks=16, block_size=BLOCK)
    _all_in_cpp(monkeypatch)
    stack = runner.lean.stack if runner.lean is not None else None
    assert stack is not None

    def tiles(_weight: torch.Tensor, rows: int, gated: bool = False, logits: bool = False) -> LinearForm:  # noqa: ARG001
        return LinearForm.TILES

    monkeypatch.setattr(layer_stack, "linear_form", tiles)
    plan = stack.plan(1)
    assert plan is not None
    routes = plan[0::2]
    gate_up = layer_stack.Route.PANEL_TILES if stack.needs_gate_up else layer_stack.Route.PANEL_TILES_SILU
    assert routes[layer_stack.GATE_UP] == int(gate_up) and routes[0] == int(layer_stack.Route.PANEL_TILES)
