"""Scheduler configuration (frozen, validated): a leaf that imports nothing of the scheduler."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SchedulerConfig:
    """Limits of one scheduler.

    ``num_blocks`` includes the reserved null block. ``long_prefill_token_threshold`` (0 = off)
    caps the tokens one request may prefill per step. ``max_pinned_fraction`` caps the share of
    the pool that CONTINUUM pins may hold; with ``soft_pins`` the rest of a pin's prefix is still
    held past the cap, as a soft tail that yields to running requests and to earlier jobs, and a
    pin whose TTL ran out stays soft for ``soft_pin_grace`` more seconds.
    """

    num_blocks: int
    block_size: int = 16
    max_num_seqs: int = 64
    max_num_batched_tokens: int = 2048
    max_model_len: int = 4096
    long_prefill_token_threshold: int = 0
    policy: str = "fcfs"  # a name of ``scheduler.policy.POLICIES`` (the registry validates it)
    enable_prefix_caching: bool = True
    max_pinned_fraction: float = 0.5
    # The share of that pin budget one tenant's hard pins may hold (1.0: no per-tenant limit).
    max_pinned_fraction_per_tenant: float = 1.0
    soft_pins: bool = True
    soft_pin_grace: float = 2.0
    # Blocks the second KV tier holds (0 = no tier): evicted blocks wait there to be loaded back.
    num_offload_blocks: int = 0
    # With a tier, a demoted job's blocks go back up this many seconds before its expected return (0: never).
    prefetch_horizon: float = 2.0

    def __post_init__(self) -> None:
        if self.num_blocks < 2:
            raise ValueError("num_blocks must be >= 2 (block 0 is reserved)")
        if self.block_size < 1:
            raise ValueError("block_size must be >= 1")
        if self.max_num_seqs < 1:
            raise ValueError("max_num_seqs must be >= 1")
        if self.max_num_batched_tokens < 1:
            raise ValueError("max_num_batched_tokens must be >= 1")
        if self.max_model_len < 2:
            raise ValueError("max_model_len must be >= 2")
        if self.max_model_len > (self.num_blocks - 1) * self.block_size:
            raise ValueError(
                f"max_model_len {self.max_model_len} exceeds the KV pool "
                f"({self.num_blocks - 1} blocks x {self.block_size} tokens)"
            )
        if self.long_prefill_token_threshold < 0:
            raise ValueError("long_prefill_token_threshold must be >= 0")
        if not 0.0 <= self.max_pinned_fraction <= 1.0:
            raise ValueError("max_pinned_fraction must be in [0, 1]")
        if not 0.0 <= self.max_pinned_fraction_per_tenant <= 1.0:
            raise ValueError("max_pinned_fraction_per_tenant must be in [0, 1]")
        if self.num_offload_blocks < 0:
            raise ValueError("num_offload_blocks must be >= 0")
        if not self.prefetch_horizon >= 0.0:
            raise ValueError("prefetch_horizon must be >= 0 seconds")
        if not self.soft_pin_grace >= 0.0:
            raise ValueError("soft_pin_grace must be >= 0 seconds")
