"""Fixed-shape decode steps (what a CUDA graph records) == the eager step; the Triton decode kernel ==
the reference. On CPU the graphs' step runs eagerly (``capture=False``) and the Triton kernel in
Triton's interpreter; the captured graphs themselves are checked by the ``gpu`` tests."""

from __future__ import annotations

import copy
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from test_model_runner import BLOCK, Seq, _step, _tiny

from agent_engine.model.decode_graphs import DecodeGraphs, _check_replay
from agent_engine.model.runner import ModelRunner
from kernels import build_attention_metadata
from kernels.paged_attention import paged_attention_reference
from kernels.static_decode import StaticDecodeBatch

pytestmark = pytest.mark.core


def _runner(model: torch.nn.Module, graph_rows: int) -> ModelRunner:
    """A CPU runner on the HF modules (the path graphs record on a GPU), with eager decode graphs."""
    runner = ModelRunner(copy.deepcopy(model), num_kv_blocks=64, block_size=BLOCK)
    runner.lean = None
    if graph_rows:
        runner.graphs = DecodeGraphs(runner._static_decode_step, graph_rows, runner.num_kv_blocks - 1, BLOCK,
                                     runner.device, capture=False)
    return runner


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_static_decode_steps_equal_eager_steps(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Decode steps of 3 and then 2 rows through padded static batches (row buckets 4 and 2, widths 8
    and 16 blocks as the contexts grow past 32 tokens) give the eager path's logits; prefill steps and a
    step of more rows than the graphs hold stay eager."""
    monkeypatch.setattr(importlib.import_module("kernels.static_decode"), "STATIC_DECODE_ROUTE", "gather")
    model = _tiny(kind)
    gen = torch.Generator().manual_seed(5)
    prompts = [torch.randint(0, 128, (n,), generator=gen).tolist() for n in (27, 5, 12)]
    tables = [[3, 7, 1, 12, 9, 2, 30, 31, 40, 41, 42, 43], [5, 4, 10, 20, 21], [6, 8, 11, 13, 14, 15, 16]]

    def run(graph_rows: int) -> tuple[list[torch.Tensor], DecodeGraphs | None]:
        runner = _runner(model, graph_rows)
        seqs = [Seq(r, p, list(t)) for r, p, t in zip("abc", prompts, tables, strict=True)]
        logits = [_step(runner, [(s, len(s.tokens)) for s in seqs])[1]]
        for _ in range(8):  # a's context grows from 28 past 32 tokens: width bucket 8 -> 16 blocks
            logits.append(_step(runner, [(s, 1) for s in seqs])[1])
        for _ in range(2):
            logits.append(_step(runner, [(s, 1) for s in seqs[:2]])[1])
        return logits, runner.graphs

    eager, _ = run(0)
    static, graphs = run(4)
    assert graphs is not None and graphs.steps == 10
    assert {key[1] for key in graphs._entries} == {8, 16} and {key[0] for key in graphs._entries} == {2, 4}
    for x, y in zip(static, eager, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-5)
    small, graphs = run(2)  # 3 rows never fit: every step eager, the 2-row decodes static
    assert graphs is not None and graphs.steps == 2
    for x, y in zip(small, eager, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-5, atol=1e-5)


def test_static_batch_pads_rows_and_rejects_what_does_not_fit() -> None:
    batch = StaticDecodeBatch(rows=4, width=3, block_size=4, device=torch.device("cpu"))
    batch.fill([11, 12], [5, 0], [[7, 2, 9, 9], [3]])
    assert batch.input_ids.tolist() == [11, 12, 0, 0]
    assert batch.positions.tolist() == [5, 0, 0, 0]
    assert batch.slot_mapping.tolist() == [2 * 4 + 1, 3 * 4, 0, 0]  # padding writes the null block only
    assert batch.seq_lens.tolist() == [6, 1, 1, 1]
    assert batch.cu_seqlens_k.tolist() == [0, 6, 7, 8, 9]
    assert batch.block_tables.tolist() == [[7, 2, 9], [3, 0, 0], [0, 0, 0], [0, 0, 0]]
    assert batch.metadata.static_decode and batch.metadata.all_decode
    batch.fill([], [], [])  # padding alone: what a graph is captured on
    assert batch.seq_lens.tolist() == [1] * 4 and batch.slot_mapping.tolist() == [0] * 4
    batch.fill_probe()  # what its replay is checked on: other values, still only the null block
    assert batch.input_ids.tolist() == batch.positions.tolist() == batch.slot_mapping.tolist() == [0, 1, 2, 3]
    assert batch.seq_lens.tolist() == [1, 2, 3, 4] and batch.block_tables.tolist() == [[0, 0, 0]] * 4
    wide = StaticDecodeBatch(rows=6, width=1, block_size=4, device=torch.device("cpu"))
    wide.fill_probe()  # rows past the block are padding, writing what row 0 writes
    assert wide.slot_mapping.tolist() == [0, 1, 2, 3, 0, 0] and wide.seq_lens.tolist() == [1, 2, 3, 4, 1, 1]
    with pytest.raises(ValueError, match="do not fit"):
        batch.fill([1] * 5, [0] * 5, [[1]] * 5)
    with pytest.raises(ValueError, match="past this batch"):
        batch.fill([1], [12], [[1, 2, 3, 4]])
    with pytest.raises(ValueError, match="misses the block"):
        batch.fill([1], [4], [[1]])
    graphs = DecodeGraphs(lambda b: torch.zeros(b.rows, 3), max_rows=20, max_width=100, block_size=4,
                          device=torch.device("cpu"), capture=False)
    assert graphs.row_buckets == (1, 2, 4, 8, 16, 20) and graphs.width_buckets == (8, 16, 32, 64, 100)
    assert graphs.accepts(20, 100) and not graphs.accepts(21, 1) and not graphs.accepts(1, 101)
    assert graphs.warm_up(20, 100) == 0  # nothing to capture without CUDA graphs
    _check_replay(torch.full((2, 3), 40.0), torch.full((2, 3), 40.2))  # rounding of other kernels: kept
    with pytest.raises(RuntimeError, match="differs"):
        _check_replay(torch.zeros(2, 3), torch.full((2, 3), 40.0))  # a graph that recorded something else
    with pytest.raises(ValueError, match="CUDA graphs need a CUDA device"):
        DecodeGraphs(lambda b: torch.zeros(1), 4, 8, 4, torch.device("cpu"))


_INTERPRETED_CHECK = """
import torch
from kernels import build_attention_metadata
from kernels.paged_attention import paged_attention_reference
from kernels.static_decode import StaticDecodeBatch, paged_attention_static_decode
from kernels.triton_decode import paged_decode_triton
import kernels.static_decode as static

torch.manual_seed(0)
for hq, hk, d in [(14, 2, 64), (8, 8, 32), (4, 1, 80)]:
    k, v = torch.randn(64, 16, hk, d), torch.randn(64, 16, hk, d)
    ctx, order, tables = [1, 17, 100, 63, 200], (torch.randperm(63) + 1).tolist(), []
    for c in ctx:
        n = -(-c // 16)
        tables.append(order[:n])
        order = order[n:]
    meta = build_attention_metadata([1] * 5, [c - 1 for c in ctx], tables, 16)
    q = torch.randn(5, hq, d)
    ref = paged_attention_reference(q, k, v, meta, d**-0.5)
    torch.testing.assert_close(paged_decode_triton(q, k, v, meta.block_tables, meta.seq_lens, d**-0.5), ref,
                               rtol=1e-5, atol=1e-5)
batch = StaticDecodeBatch(rows=8, width=16, block_size=16, device=torch.device("cpu"))
batch.fill(list(range(5)), [c - 1 for c in ctx], tables)
padded = torch.cat([q, torch.randn(3, hq, d)])
routes = []
for route in ("triton", "gather"):
    static.STATIC_DECODE_ROUTE = route
    routes.append(paged_attention_static_decode(padded, k, v, batch.metadata, d**-0.5)[:5])
torch.testing.assert_close(routes[0], ref, rtol=1e-5, atol=1e-5)
torch.testing.assert_close(routes[1], ref, rtol=1e-5, atol=1e-5)
try:
    two_heads = torch.randn(64, 16, 2, 16)
    paged_decode_triton(torch.randn(1, 3, 16), two_heads, two_heads, meta.block_tables, meta.seq_lens, 1.0)
except ValueError as exc:
    assert "does not fit" in str(exc)
else:
    raise AssertionError("a query whose heads do not divide into the cache's took no error")
print("ok")
"""


def test_triton_decode_kernel_matches_reference_in_interpreter() -> None:
    """In Triton's interpreter (a fresh process: Triton reads TRITON_INTERPRET when it is imported):
    GQA groups of 7, 1 and 4 heads, head sizes 64 / 32 / 80 (padded to 128), contexts of 1 to 200 keys
    over shuffled blocks, within float32 rounding of the float64 reference; the static step's Triton and
    gather routes agree on a padded batch; a query whose heads do not fit the cache is a ValueError."""
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    result = subprocess.run([sys.executable, "-c", _INTERPRETED_CHECK], capture_output=True, text=True,
                            timeout=300, env=env, cwd=Path(__file__).resolve().parents[1])
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-3000:]


def test_gather_route_matches_reference_with_padding() -> None:
    """The graphs' SDPA route over tables gathered to the full width == the reference, padded rows aside."""
    from kernels.static_decode import paged_attention_static_decode

    torch.manual_seed(1)
    k, v = torch.randn(40, 4, 2, 16), torch.randn(40, 4, 2, 16)
    ctx, tables = [0, 9, 30], [[5], [7, 3, 8], [1, 2, 4, 6, 9, 10, 11, 12]]
    batch = StaticDecodeBatch(rows=4, width=8, block_size=4, device=torch.device("cpu"))
    batch.fill([1, 2, 3], ctx, tables)
    q = torch.randn(4, 4, 16)
    out = paged_attention_static_decode(q, k, v, batch.metadata, 0.25)
    ref = paged_attention_reference(q[:3], k, v, build_attention_metadata([1] * 3, ctx, tables, 4), 0.25)
    torch.testing.assert_close(out[:3], ref, rtol=1e-5, atol=1e-5)


def test_runner_runs_a_step_eagerly_when_its_graph_cannot_be_captured(monkeypatch: pytest.MonkeyPatch) -> None:
    """A step no graph serves (``run`` gives None: its capture failed) goes to the eager path: the same
    logits as a runner without graphs."""
    model = _tiny("llama")

    class Broken:
        steps = 0

        def run(self, *args: object) -> torch.Tensor | None:
            Broken.steps += 1
            return None

    def run(graphs: object) -> list[torch.Tensor]:
        runner = _runner(model, 0)
        runner.graphs = graphs  # type: ignore[assignment]
        seqs = [Seq("a", [5, 6, 7, 8, 9], [3, 4]), Seq("b", [1, 2], [6, 8])]
        out = [_step(runner, [(s, len(s.tokens)) for s in seqs])[1]]
        out += [_step(runner, [(s, 1) for s in seqs])[1] for _ in range(3)]
        return out

    for x, y in zip(run(Broken()), run(None), strict=True):
        torch.testing.assert_close(x, y, rtol=0, atol=0)
    assert Broken.steps == 3  # every decode step asked the graphs first


def test_a_failing_triton_kernel_turns_itself_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel that fails to build or launch: the static step takes the gather route, and the kernel
    stays off for the process; a ValueError (shapes that do not fit) is raised, not swallowed."""
    from kernels import static_decode, triton_decode

    monkeypatch.setattr(triton_decode, "_disabled", [])
    monkeypatch.setattr(static_decode, "STATIC_DECODE_ROUTE", "triton")
    torch.manual_seed(2)
    k, v = torch.randn(12, 4, 2, 16), torch.randn(12, 4, 2, 16)
    batch = StaticDecodeBatch(rows=2, width=3, block_size=4, device=torch.device("cpu"))
    batch.fill([1, 2], [5, 2], [[3, 4], [7]])
    q = torch.randn(2, 4, 16)

    def fails(*args: object, **kwargs: object) -> torch.Tensor:
        raise RuntimeError("planted: no kernel for this GPU")

    monkeypatch.setattr(triton_decode, "paged_decode_triton", fails)
    out = static_decode.paged_attention_static_decode(q, k, v, batch.metadata, 0.25)
    ref = paged_attention_reference(q, k, v, build_attention_metadata([1, 1], [5, 2], [[3, 4], [7]], 4), 0.25)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    assert not triton_decode.triton_available() and "planted" in triton_decode._disabled[0]

    def misfits(*args: object, **kwargs: object) -> torch.Tensor:
        raise ValueError("planted: shapes")

    monkeypatch.setattr(triton_decode, "_disabled", [])
    monkeypatch.setattr(triton_decode, "paged_decode_triton", misfits)
    with pytest.raises(ValueError, match="planted"):
        static_decode.paged_attention_static_decode(q, k, v, batch.metadata, 0.25)
    assert not triton_decode._disabled
