"""Step time and KV pool size from first principles: bytes over bandwidth, FLOPs over throughput.

One step runs a packed batch of chunks ``(n new tokens, c tokens already computed, sampled?)``.
Per GPU (tensor parallel degree ``tp`` splits weights, FLOPs and KV heads):

- bytes  = weights (layers + LM head) + KV read and written (``c + n`` tokens per chunk)
- FLOPs  = ``2 * matmul_params * tokens + 2 * hidden * vocab * sampled`` (GEMMs)
           + ``4 * layers * heads * head_dim * n * (c + (n + 1) / 2)`` per chunk (causal attention)
- time   = combine(bytes / BW, GEMM FLOPs / F + attention FLOPs / F_attn)
           + overhead + per_request * requests + TP all-reduces (2 per layer, ring)

``combine`` is ``max`` on a GPU (memory and compute overlap: the roofline) and ``sum`` on a CPU (they
do not). The GPU constants are datasheet peaks times per-GPU efficiency factors (``specs.GPUSpec``);
the CPU constants are fitted by ``calibrate`` on the real engine with the same feature vector.

Invariants: ``step_time`` is positive and non-decreasing in every chunk's ``n`` and ``c``;
``features`` and ``step_time`` are pure; the KV pool follows vLLM's arithmetic
(``memory * utilization - weights - activation peak``) and is never below 2 blocks.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Literal

from agent_engine.sim.specs import GPUSpec, ModelSpec
from scheduler.tier_copy import KVBlockShape

__all__ = ["CostConstants", "CostModel", "StepFeatures", "kv_pool_blocks"]

_GIB = 1024**3
# Memory vLLM keeps outside the profiled torch peak: CUDA graphs, NCCL and the CUDA context.
_NON_TORCH_RESERVE_BYTES = 1.0 * _GIB

Chunk = tuple[int, int, bool]  # (new tokens, computed tokens before the step, sampled this step)


@dataclass(frozen=True)
class CostConstants:
    """The machine's side of the cost model (rates in units per second, times in seconds)."""

    flops_per_s: float
    attn_flops_per_s: float
    bytes_per_s: float
    step_overhead_s: float
    per_request_s: float
    combine: Literal["max", "sum"] = "max"
    link_bytes_per_s: float = 0.0
    allreduce_latency_s: float = 0.0
    # Host memory <-> device copies of the second KV tier (0: free, as on a CPU where both are RAM).
    host_bytes_per_s: float = 0.0
    source: str = ""

    @classmethod
    def from_gpu(cls, gpu: GPUSpec) -> CostConstants:
        """Datasheet peaks times the GPU's efficiency factors; roofline (``max``) combination."""
        return cls(
            flops_per_s=gpu.bf16_tflops * 1e12 * gpu.flops_efficiency,
            attn_flops_per_s=gpu.bf16_tflops * 1e12 * gpu.attn_efficiency,
            bytes_per_s=gpu.hbm_tbps * 1e12 * gpu.bw_efficiency,
            step_overhead_s=gpu.step_overhead_s,
            per_request_s=gpu.per_request_s,
            combine="max",
            link_bytes_per_s=gpu.link_gbps * 1e9,
            allreduce_latency_s=gpu.allreduce_latency_s,
            host_bytes_per_s=gpu.host_gbps * 1e9,
            source=f"gpu:{gpu.name}",
        )

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict (``from_dict`` reads it back)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, object]) -> CostConstants:
        """Constants from a dict; unknown keys are ignored."""
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in known})  # type: ignore[arg-type]

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the constants as JSON (``load`` reads it back)."""
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f, indent=2)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> CostConstants:
        """Constants from a JSON file (a calibration file's ``"constants"`` object is accepted too)."""
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
        return cls.from_dict(d.get("constants", d))


@dataclass(frozen=True)
class StepFeatures:
    """What one step costs in machine-independent units (per GPU)."""

    requests: int
    tokens: int
    sampled: int
    gemm_flops: float
    attn_flops: float
    weight_bytes: float
    kv_bytes: float
    allreduce_bytes: float  # per all-reduce call (0 without TP)

    def as_row(self) -> list[float]:
        """The linear design row of the ``sum`` model: overhead, requests, bytes, GEMM and attention FLOPs."""
        bytes_moved = self.weight_bytes + self.kv_bytes
        return [1.0, float(self.requests), bytes_moved, self.gemm_flops, self.attn_flops]


class CostModel:
    """Step times of ``model`` on a machine described by ``consts`` with tensor parallelism ``tp``."""

    def __init__(self, model: ModelSpec, consts: CostConstants, tp: int = 1) -> None:
        if tp < 1:
            raise ValueError("tp must be >= 1")
        self.model = model
        self.consts = consts
        self.tp = tp
        m = model
        self._gemm_per_token = 2.0 * m.matmul_params / tp
        self._lm_head_per_row = 2.0 * m.hidden_size * m.vocab_size / tp
        self._attn_coef = 4.0 * m.num_layers * m.num_heads * m.head_dim / tp
        self._weight_bytes = float((m.matmul_params + m.vocab_size * m.hidden_size) * m.dtype_bytes) / tp
        self._kv_per_token = m.kv_bytes_per_token / tp
        self._num_allreduce = 2 * m.num_layers if tp > 1 else 0
        self._ar_bytes_per_token = m.hidden_size * m.dtype_bytes if tp > 1 else 0

    def features(self, chunks: Iterable[Chunk]) -> StepFeatures:
        """Feature totals of one step's chunks."""
        reqs = toks = sampled = 0
        attn = 0.0
        ctx = 0
        for n, c, s in chunks:
            reqs += 1
            toks += n
            sampled += s
            attn += n * (c + (n + 1) * 0.5)
            ctx += c + n
        return StepFeatures(
            requests=reqs, tokens=toks, sampled=sampled,
            gemm_flops=self._gemm_per_token * toks + self._lm_head_per_row * sampled,
            attn_flops=self._attn_coef * attn,
            weight_bytes=self._weight_bytes if reqs else 0.0,
            kv_bytes=self._kv_per_token * ctx,
            allreduce_bytes=float(self._ar_bytes_per_token * toks),
        )

    def time_of(self, f: StepFeatures) -> float:
        """Seconds of a step with features ``f`` (0 for an empty step)."""
        if f.requests == 0:
            return 0.0
        k = self.consts
        t_mem = (f.weight_bytes + f.kv_bytes) / k.bytes_per_s
        t_cmp = f.gemm_flops / k.flops_per_s + f.attn_flops / k.attn_flops_per_s
        t = max(t_mem, t_cmp) if k.combine == "max" else t_mem + t_cmp
        t += k.step_overhead_s + k.per_request_s * f.requests
        if self._num_allreduce and k.link_bytes_per_s > 0:
            ring = 2.0 * (self.tp - 1) / self.tp * f.allreduce_bytes / k.link_bytes_per_s
            t += self._num_allreduce * (k.allreduce_latency_s + ring)
        return t

    def step_time(self, chunks: Iterable[Chunk]) -> float:
        """Seconds of one step over ``chunks`` ``(n, c, sampled)``."""
        return self.time_of(self.features(chunks))

    def block_bytes(self, block_size: int) -> float:
        """Bytes of one KV block of ``block_size`` tokens on one GPU (its tensor-parallel shard)."""
        return block_size * self._kv_per_token

    def block_shape(self, block_size: int) -> KVBlockShape:
        """One GPU's shard of a KV block as the second tier sizes it (``scheduler.tier_copy.tier_blocks``):
        ``block_bytes`` in the model's KV dtype, its layers and its share of the KV heads."""
        m = self.model
        heads = max(1, m.num_kv_heads // self.tp)
        return KVBlockShape(self.block_bytes(block_size), m.dtype_bytes, m.num_layers, heads)

    def tier_load_time(self, num_blocks: int, block_size: int) -> float:
        """Seconds to load ``num_blocks`` KV blocks from the host tier (per GPU's shard). The simulator
        charges a lookup's loads before the step, a prefetch's only past the compute it overlaps; saves
        run on a copy engine and are not charged."""
        rate = self.consts.host_bytes_per_s
        return num_blocks * self.block_bytes(block_size) / rate if rate > 0 and num_blocks else 0.0

    def prefill_time(self, context_tokens: int, chunk_tokens: int = 8192) -> float:
        """Seconds to prefill a fresh context alone, in chunks of ``chunk_tokens`` (the reload cost R)."""
        t, done = 0.0, 0
        while done < context_tokens:
            n = min(chunk_tokens, context_tokens - done)
            t += self.step_time([(n, done, done + n == context_tokens)])
            done += n
        return t


def activation_reserve_bytes(
    model: ModelSpec, tp: int, max_num_batched_tokens: int, max_num_seqs: int
) -> float:
    """Peak non-KV memory of a forward pass as vLLM's profile run would see it, plus non-torch memory.

    Hidden states, q/k/v and the gated MLP's two intermediate tensors for the full token budget, fp32
    logits of up to ``max_num_seqs`` sampled rows (twice: logits and probabilities), plus 1 GiB for
    CUDA graphs, NCCL buffers and the context.
    """
    m = model
    per_token = (4 * m.hidden_size + 2 * m.intermediate_size / tp) * m.dtype_bytes
    logits = max_num_seqs * m.vocab_size * 4 * 2 / tp
    return max_num_batched_tokens * per_token + logits + _NON_TORCH_RESERVE_BYTES


def kv_pool_blocks(
    model: ModelSpec,
    gpu: GPUSpec,
    tp: int = 1,
    gpu_memory_utilization: float = 0.9,
    block_size: int = 16,
    max_num_batched_tokens: int = 8192,
    max_num_seqs: int = 256,
) -> int:
    """KV blocks per GPU (the null block included): ``(memory * util - weights - activations) / block``."""
    if not 0 < gpu_memory_utilization <= 1:
        raise ValueError("gpu_memory_utilization must be in (0, 1]")
    weights = model.num_params * model.dtype_bytes / tp
    act = activation_reserve_bytes(model, tp, max_num_batched_tokens, max_num_seqs)
    budget = gpu.hbm_gib * _GIB * gpu_memory_utilization - weights - act
    per_block = model.kv_bytes_per_token / tp * block_size
    n = int(budget // per_block)
    if n < 2:
        raise ValueError(
            f"{model.name} at tp={tp} does not fit {gpu.name}: KV budget {budget / _GIB:.2f} GiB "
            f"(weights {weights / _GIB:.1f} GiB per GPU)"
        )
    return n


def chunks_of(scheduled: Sequence[object]) -> list[Chunk]:
    """``(n, c, do_sample)`` of a ``SchedulerOutput.scheduled`` list."""
    return [(len(s.token_ids), s.num_computed_tokens, s.do_sample)  # type: ignore[attr-defined]
            for s in scheduled]

