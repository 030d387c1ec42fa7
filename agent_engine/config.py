"""Engine configuration: one frozen dataclass whose field names are the CLI flags (dashes -> underscores)."""

from __future__ import annotations

from dataclasses import dataclass, fields

_DTYPES = ("float32", "bfloat16", "float16", "auto")
_POLICIES = ("fcfs", "priority", "continuum")
_TTL_POLICIES = ("fixed", "paper", "learned")


@dataclass(frozen=True)
class EngineConfig:
    """Everything an ``LLMEngine`` needs. A derived value is a new object (``dataclasses.replace``).

    KV pool size: ``num_kv_blocks`` if given, else ``kv_cache_memory`` GiB, else (CUDA)
    ``gpu_memory_utilization`` of free device memory, else 1 GiB on CPU. ``max_model_len`` defaults
    to the smaller of the model's position limit and the pool's capacity in tokens.
    """

    model: str | None = None
    served_model_name: str | None = None
    dtype: str = "float32"
    device: str = "auto"
    seed: int = 0
    block_size: int = 16
    num_kv_blocks: int | None = None
    kv_cache_memory: float | None = None
    gpu_memory_utilization: float = 0.9
    max_num_seqs: int = 64
    max_num_batched_tokens: int = 2048
    max_model_len: int | None = None
    long_prefill_token_threshold: int = 0
    enable_prefix_caching: bool = True
    policy: str = "fcfs"
    # CONTINUUM
    max_pinned_fraction: float = 0.5
    soft_pins: bool = True
    soft_pin_grace: float = 2.0
    ttl_policy: str = "paper"
    pin_threshold: float = 2.0
    reload_cost_profile: str | None = None
    learned_model_path: str | None = None
    profile_reload_cost: bool = True
    sched_trace: str | None = None

    def __post_init__(self) -> None:
        if self.dtype not in _DTYPES:
            raise ValueError(f"dtype must be one of {_DTYPES}, got {self.dtype!r}")
        if self.policy not in _POLICIES:
            raise ValueError(f"policy must be one of {_POLICIES}, got {self.policy!r}")
        if self.ttl_policy not in _TTL_POLICIES:
            raise ValueError(f"ttl_policy must be one of {_TTL_POLICIES}, got {self.ttl_policy!r}")
        if self.device not in ("auto", "cpu", "cuda") and not self.device.startswith("cuda:"):
            raise ValueError(f"device must be auto, cpu or cuda[:N], got {self.device!r}")
        for name in ("block_size", "max_num_seqs", "max_num_batched_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.num_kv_blocks is not None and self.num_kv_blocks < 2:
            raise ValueError("num_kv_blocks must be >= 2")
        if self.kv_cache_memory is not None and self.kv_cache_memory <= 0:
            raise ValueError("kv_cache_memory must be > 0 GiB")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ValueError("gpu_memory_utilization must be in (0, 1]")
        if self.max_model_len is not None and self.max_model_len < 2:
            raise ValueError("max_model_len must be >= 2")
        if self.long_prefill_token_threshold < 0:
            raise ValueError("long_prefill_token_threshold must be >= 0")
        if not 0 <= self.max_pinned_fraction <= 1:
            raise ValueError("max_pinned_fraction must be in [0, 1]")
        if not self.soft_pin_grace >= 0:
            raise ValueError("soft_pin_grace must be >= 0 seconds")
        if self.pin_threshold < 0:
            raise ValueError("pin_threshold must be >= 0")

    @classmethod
    def from_kwargs(cls, **kwargs: object) -> EngineConfig:
        """Build from keyword arguments, rejecting unknown names with the list of known ones."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise ValueError(f"unknown engine option(s) {unknown}; known: {sorted(known)}")
        return cls(**kwargs)  # type: ignore[arg-type]
