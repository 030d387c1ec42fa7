"""Achieved GFLOP/s and GB/s per phase of an engine run, as shares of this machine's roofline.

A :class:`PhaseMeter` listens to the engine's steps (``LLMEngine.step_listeners``; each step reports
its ``SchedulerOutput.work()``) and sums, per phase, the wall time of the steps and what they computed:

- ``prefill``: steps that carry prompt tokens (more rows than requests; decode rows riding along in
  the same step are counted with them), ``decode``: steps of one new token per request.
- FLOPs: ``2 x`` the decoder layers' matmul weights per row, ``2 x H x V`` per sampled row (the LM
  head), and ``4 x layers x query heads x head dim`` per causal query-key pair (scores and values).
- bytes: every matmul weight once per step, as the kernels read it (float32 or bfloat16 panels, or a
  GGUF's quantized blocks), and each request's K and V over its whole context once per step.

:func:`phase_rows` divides them by the step time and by the peaks that ``benchmarks.roofline`` measures
here (fp32 matmul GFLOP/s, read GB/s): a prefill near the matmul peak and a decode of a few streams
near the bandwidth are at the machine's limit. Embedding lookups, norms and activations are left out
of both counts (a few percent of either).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PHASES = ("prefill", "decode")


@dataclass(frozen=True)
class ModelCosts:
    """Per-row and per-step costs of one model as the engine runs it."""

    layer_matmul_params: int  # weights of the decoder layers' matmuls (multiply-adds per row)
    head_params: int  # hidden x vocab: multiply-adds per sampled row
    weight_bytes: int  # every matmul weight (LM head included) as the kernels read it
    num_layers: int
    num_q_heads: int
    num_kv_heads: int
    head_dim: int
    kv_itemsize: int

    @classmethod
    def of(cls, runner: Any) -> ModelCosts:
        """The costs of a ``ModelRunner``'s model (its lean decoder's weights when it has one)."""
        import torch

        model = runner.model
        layers = model.get_decoder().layers
        linears = [m for m in layers.modules() if isinstance(m, torch.nn.Linear)]
        head = model.get_output_embeddings().weight
        itemsize = head.element_size()
        lean = runner.lean
        if lean is not None and lean.layers and lean.layers[0].packed:
            itemsize = next(iter(lean.layers[0].packed.values())).element_size()
        params = sum(m.weight.numel() for m in linears)
        weight_bytes = (params + head.numel()) * itemsize
        if lean is not None and lean.head_quant is not None:  # a GGUF served from its blocks (shapes on meta)
            weight_bytes = sum(m.nbytes for layer in lean.layers for m in layer.quant.values()) + lean.head_quant.nbytes
        return cls(params, head.numel(), weight_bytes, runner.num_layers,
                   model.config.num_attention_heads, runner.num_kv_heads, runner.head_dim,
                   runner.kv_caches[0][0].element_size())


class PhaseMeter:
    """A step listener that sums seconds, rows, FLOPs and bytes per phase (see the module docstring)."""

    def __init__(self, costs: ModelCosts) -> None:
        self.costs = costs
        self.totals = {phase: {"steps": 0.0, "tokens": 0.0, "seconds": 0.0, "flops": 0.0, "bytes": 0.0}
                       for phase in PHASES}

    def __call__(self, info: dict[str, float]) -> None:
        c = self.costs
        phase = "prefill" if info["num_tokens"] > info["num_reqs"] else "decode"
        flops = 2.0 * (c.layer_matmul_params * info["num_tokens"] + c.head_params * info["num_sampled"]) \
            + 4.0 * c.num_layers * c.num_q_heads * c.head_dim * info["attention_pairs"]
        kv_bytes = 2.0 * c.num_layers * c.num_kv_heads * c.head_dim * c.kv_itemsize * info["context_tokens"]
        total = self.totals[phase]
        total["steps"] += 1
        total["tokens"] += info["num_tokens"]
        total["seconds"] += info["step_seconds"]
        total["flops"] += flops
        total["bytes"] += c.weight_bytes + kv_bytes


def measure_peaks(device: str = "cpu", matmul_dtype: str = "fp32") -> dict[str, Any]:
    """The device's ``matmul_dtype`` matmul GFLOP/s and read GB/s (a CPU at torch's current thread
    count; a GPU on large operands, as its peaks need). A CPU's math is float32 whatever the weights'
    form, so its peak is fp32's; a GPU's is the model's dtype's."""
    from benchmarks import roofline

    gpu = device != "cpu"
    gflops = roofline.matmul_gflops(matmul_dtype, n=8192 if gpu else 2048, device=device) or 0.0
    read = roofline.bandwidth_gbs(n_bytes=2**31 if gpu else roofline.COPY_BYTES, device=device)["read"]
    return {"matmul_gflops": gflops, "matmul_dtype": matmul_dtype, "read_gbs": read, "device": device}


def phase_rows(meter: PhaseMeter, peaks: dict[str, float]) -> list[dict[str, Any]]:
    """One row per phase that ran: steps, tokens, seconds, GFLOP/s and GB/s, each as a share of its peak."""
    out = []
    for phase, t in meter.totals.items():
        if not t["steps"] or t["seconds"] <= 0:
            continue
        gflops, gbs = t["flops"] / t["seconds"] / 1e9, t["bytes"] / t["seconds"] / 1e9
        out.append({"phase": phase, "steps": int(t["steps"]), "tokens": int(t["tokens"]), "seconds": t["seconds"],
                    "gflops": gflops, "flops_share": gflops / peaks["matmul_gflops"] if peaks["matmul_gflops"] else None,
                    "gbs": gbs, "bandwidth_share": gbs / peaks["read_gbs"] if peaks["read_gbs"] else None})
    return out


def print_phase_table(rows: list[dict[str, Any]], peaks: dict[str, float]) -> None:
    """The per-phase table, with the peaks it is read against."""
    from agent_engine.reporting import print_table

    kind = peaks["matmul_dtype"]
    print(f"achieved against the {peaks['device']} roofline ({kind} matmul {peaks['matmul_gflops']:.0f} GFLOP/s, "
          f"read {peaks['read_gbs']:.1f} GB/s):")
    print_table(["phase", "steps", "tokens", "seconds", "GFLOP/s", f"% of {kind} peak", "GB/s", "% of read bw"],
                [[r["phase"], r["steps"], r["tokens"], r["seconds"], r["gflops"],
                  None if r["flops_share"] is None else 100 * r["flops_share"], r["gbs"],
                  None if r["bandwidth_share"] is None else 100 * r["bandwidth_share"]] for r in rows])
