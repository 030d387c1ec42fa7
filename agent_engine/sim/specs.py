"""Model and GPU spec tables for the simulator (published numbers, sources named per row).

Invariants:
- A ``ModelSpec`` holds an HF ``config.json``'s shape; parameter counts are derived from it
  (``ModelSpec.num_params``), never typed in, so the FLOP and byte counts of the cost model agree.
- A ``GPUSpec`` holds datasheet peaks (dense BF16 tensor TFLOPs, no sparsity; HBM TB/s; HBM GiB as the
  driver reports it) plus the achievable fractions the cost model multiplies them by.
- Names are lower-case keys; ``get_model`` / ``get_gpu`` raise ``KeyError`` listing the known ones.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GPUS", "MODELS", "GPUSpec", "ModelSpec", "get_gpu", "get_model"]


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer's shape (Llama/Qwen family: GQA attention, gated MLP)."""

    name: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int
    tie_word_embeddings: bool = False
    dtype_bytes: int = 2  # bf16 weights and KV cache
    source: str = ""

    @property
    def layer_params(self) -> int:
        """Weights of one decoder layer: q, k, v, o projections, gate/up/down MLP (norms ignored)."""
        h, d = self.hidden_size, self.head_dim
        attn = h * self.num_heads * d * 2 + h * self.num_kv_heads * d * 2
        return attn + 3 * h * self.intermediate_size

    @property
    def matmul_params(self) -> int:
        """Weights every token multiplies through (all layers; the LM head is counted per sampled row)."""
        return self.num_layers * self.layer_params

    @property
    def num_params(self) -> int:
        """All weights: layers + embedding + LM head (one matrix when tied)."""
        emb = self.vocab_size * self.hidden_size
        return self.matmul_params + emb * (1 if self.tie_word_embeddings else 2)

    @property
    def kv_bytes_per_token(self) -> int:
        """K and V of one token over all layers."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * self.dtype_bytes


@dataclass(frozen=True)
class GPUSpec:
    """Datasheet peaks of one accelerator and the fractions of them a serving engine reaches."""

    name: str
    hbm_gib: float  # memory the driver reports (torch.cuda.mem_get_info total)
    hbm_tbps: float  # peak HBM bandwidth, TB/s (1e12 B/s)
    bf16_tflops: float  # dense BF16 tensor-core peak, TFLOP/s (no 2:4 sparsity)
    link_gbps: float  # NVLink bandwidth per GPU, GB/s (one direction), for the TP all-reduce term
    host_gbps: float = 50.0  # host link (PCIe 5 x16: 64 GB/s per direction peak), achievable GB/s: KV tier loads
    bw_efficiency: float = 0.80  # achievable share of peak HBM bandwidth (weights + KV streaming)
    flops_efficiency: float = 0.60  # achievable share of peak tensor FLOPs in GEMMs
    attn_efficiency: float = 0.40  # achievable share in attention kernels (FlashAttention-2/3 class)
    step_overhead_s: float = 0.0015  # per step: scheduling, input prep, sampling, launch (CUDA graphs)
    per_request_s: float = 5e-6  # per scheduled request per step (block tables, sampling rows)
    allreduce_latency_s: float = 8e-6  # per all-reduce call (NCCL small-message latency)
    source: str = ""


# Shapes are the models' HF config.json values.
MODELS: dict[str, ModelSpec] = {
    m.name: m
    for m in (
        ModelSpec("llama-3.1-8b", 4096, 32, 32, 8, 128, 14336, 128256, 131072,
                  source="huggingface.co/meta-llama/Llama-3.1-8B config.json"),
        ModelSpec("llama-3.1-70b", 8192, 80, 64, 8, 128, 28672, 128256, 131072,
                  source="huggingface.co/meta-llama/Llama-3.1-70B config.json"),
        ModelSpec("qwen2.5-7b", 3584, 28, 28, 4, 128, 18944, 152064, 32768,
                  source="huggingface.co/Qwen/Qwen2.5-7B-Instruct config.json (32k native context)"),
        ModelSpec("qwen3-32b", 5120, 64, 64, 8, 128, 25600, 151936, 40960,
                  source="huggingface.co/Qwen/Qwen3-32B config.json"),
        # The embedded default model (agent_engine/model/default_model.py), float32 on CPU:
        # the calibration target.
        ModelSpec("default", 512, 8, 8, 2, 64, 1408, 4096, 4096, dtype_bytes=4,
                  source="agent_engine/model/default_model.py model_config_dict()"),
    )
}

GPUS: dict[str, GPUSpec] = {
    g.name: g
    for g in (
        GPUSpec("a100-80g", 79.2, 2.039, 312.0, 300.0, host_gbps=25.0,
                source="NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB: 2,039 GB/s, BF16 312 TFLOPS dense, "
                       "NVLink 600 GB/s bidirectional)"),
        GPUSpec("h100", 79.1, 3.35, 989.0, 450.0,
                source="NVIDIA H100 Tensor Core GPU datasheet (SXM5 80GB: 3.35 TB/s, BF16 1,979 TFLOPS "
                       "with sparsity = 989 dense, NVLink 900 GB/s bidirectional)"),
        GPUSpec("h200", 139.8, 4.8, 989.0, 450.0,
                source="NVIDIA H200 Tensor Core GPU datasheet (SXM 141GB: 4.8 TB/s, BF16 1,979 TFLOPS with "
                       "sparsity = 989 dense, NVLink 900 GB/s bidirectional)"),
        GPUSpec("b200", 178.0, 8.0, 2250.0, 900.0,
                source="NVIDIA DGX B200 datasheet (8x B200: 1,440 GB HBM3e, 64 TB/s, FP8 72 PFLOPS dense; "
                       "BF16 2.25 PFLOPS dense per GPU; NVLink 5 1.8 TB/s bidirectional)"),
    )
}


def get_model(name: str) -> ModelSpec:
    """The model spec called ``name`` (case-insensitive)."""
    try:
        return MODELS[name.lower()]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known: {sorted(MODELS)}") from None


def get_gpu(name: str) -> GPUSpec:
    """The GPU spec called ``name`` (case-insensitive)."""
    try:
        return GPUS[name.lower()]
    except KeyError:
        raise KeyError(f"unknown GPU {name!r}; known: {sorted(GPUS)}") from None
