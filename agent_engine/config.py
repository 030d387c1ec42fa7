"""Engine configuration: one frozen dataclass whose field names are the CLI flags (dashes -> underscores).

The one place where user options become engine settings: ``EngineConfig.add_arguments`` generates
the flags from the fields (so the CLI and the config never drift; the simulator and the benchmarks add
the subset they set, overriding a default only where they list it), ``EngineConfig.from_args`` reads
them back, and ``EngineConfig.scheduler_config`` derives the ``SchedulerConfig`` once the pool size
and model length are known. Every command, the server, the benchmarks and the simulator build their
engines through these.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields

from estimator import TTL_POLICIES as TTL_POLICY_NAMES  # the one list of TTL-policy names
from scheduler import SchedulerConfig
from scheduler.policy import POLICY_NAMES, policy_class  # the registry of scheduling policies
from scheduler.tier_copy import OFFLOAD_DTYPES  # the one list of the tier's forms

__all__ = ["DEFAULT_TOKEN_BUDGET", "POLICY_NAMES", "MEASURED_TOKEN_BUDGET", "TTL_POLICY_NAMES", "EngineConfig"]

_DTYPES = ("float32", "bfloat16", "float16", "auto")
_SIZE_SUFFIXES = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def parse_size(text: str) -> int:
    """``"512M"`` -> 536870912; a plain number is bytes. ``ValueError`` for anything else or a negative size."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    suffix = t[-1:] if t[-1:] in _SIZE_SUFFIXES else ""
    number = t[: len(t) - len(suffix)]
    try:
        value = float(number) * _SIZE_SUFFIXES[suffix]
    except ValueError:
        raise ValueError(f"a size is a number of bytes with an optional K/M/G/T suffix, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise ValueError(f"a size must be a finite number >= 0, got {text!r}")
    return int(value)
DEFAULT_TOKEN_BUDGET = 2048  # tokens per step when unset: offline, and serving on CUDA
# Serving on CPU, a wider step makes no more tokens a second once the matmuls run at full speed; it only
# makes a burst's prompts and every decode wait for each other. Where that width lies is measured on the
# loaded model per CPU (``engine.step_budget``): a budget of MEASURED_TOKEN_BUDGET asks for it.
MEASURED_TOKEN_BUDGET = 0



GGUF_WEIGHTS = ("native", "mapped", "float32")
KV_CACHE_DTYPES = ("auto", "float32", "bfloat16")

_HELP = {
    "model": "local HF folder (config.json, safetensors, tokenizer.json), a .gguf file or a known name: smollm2, "
             "qwen2.5-coder-0.5b, qwen2.5-coder-1.5b (docs/models.md); default: the embedded model",
    "served_model_name": "model name reported by the API (default: folder name)",
    "dtype": "float32 | bfloat16 | float16 | auto",
    "gguf_weights": "a .gguf or known model's weights: native (one copy: every matmul on the file's quantized "
                    "blocks by the C++ kernels, the blocks in transparent huge pages where Linux offers them; "
                    "CPU, float32 activations; where it cannot, float32 with a log line saying why) | mapped "
                    "(native on the memory-mapped file itself: 4 KiB pages, shared with other processes of the "
                    "file) | float32 (dequantized once into a cached float32 Hugging Face folder)",
    "kv_cache_dtype": "auto (the model's dtype: bfloat16 for a bfloat16 model, as vLLM's auto; float32 for a "
                      "float32 one) | float32 (float32 activations; attention in float32) | bfloat16 (half the "
                      "bytes a token's K and V take and a decode step reads; rounded to bf16, attention in "
                      "bfloat16 products where the CPU has them (AVX512_BF16), else float32; on CPU the lean "
                      "decoder with the C++ kernels)",
    "device": "auto | cpu | cuda[:N]",
    "cuda_graphs": "CUDA: replay decode steps (up to max_num_seqs rows) from CUDA graphs captured per batch and "
                   "context bucket on first use; --no-cuda-graphs runs every step eagerly",
    "seed": "engine seed for sampling without a per-request seed",
    "block_size": "tokens per KV block",
    "num_kv_blocks": "KV pool size in blocks (overrides --kv-cache-memory)",
    "kv_cache_memory": "KV pool size in GiB (default 1 GiB on CPU, a fraction of free memory on CUDA)",
    "gpu_memory_utilization": "fraction of GPU memory the engine may use (CUDA only)",
    "max_num_seqs": "most requests running at once",
    "max_num_batched_tokens": f"token budget per step (prefill chunks + decodes); {MEASURED_TOKEN_BUDGET}: on CPU, of "
                              "steps of 256, 512 and 1024 tokens timed on the loaded model (once per CPU and model, "
                              "then stored), the narrowest within 5%% of the best rate per token, at least "
                              f"max_num_seqs; unset: {MEASURED_TOKEN_BUDGET} for a server on CPU, else "
                              f"{DEFAULT_TOKEN_BUDGET}",
    "max_model_len": "longest prompt + output (default: model limit, capped by the KV pool)",
    "long_prefill_token_threshold": "most prompt tokens one request may prefill per step (0 = no cap)",
    "enable_prefix_caching": "reuse KV blocks of identical prefixes",
    "policy": "fcfs | priority | continuum",
    "max_pinned_fraction": "CONTINUUM: most of the KV pool that pins may hold",
    "max_pinned_fraction_per_tenant": "CONTINUUM: share of that pin budget one tenant (API key) may hold",
    "soft_pins": "CONTINUUM: hold the part of a pin past the cap as a soft tail that yields to running "
                 "requests and earlier jobs' admissions (only later jobs wait for it)",
    "soft_pin_grace": "CONTINUUM with soft pins: seconds an expired pin stays soft before it ends (0 = none)",
    "ttl_policy": "CONTINUUM: fixed | paper | learned",
    "pin_threshold": "CONTINUUM fixed policy: pin seconds (and the mean-duration cut-off)",
    "reload_cost_profile": "CONTINUUM: JSON reload-cost profile instead of profiling at start-up",
    "learned_model_path": "CONTINUUM learned policy: model from `agent-engine estimator fit`",
    "profile_reload_cost": "CONTINUUM paper policy: time prefill at start-up to fit R(ctx)",
    "infer_jobs": "CONTINUUM: a request without a job hint joins the job whose last turn its prompt extends",
    "sched_trace": "write a JSONL scheduler trace to this path (off by default)",
    "kv_offload_bytes": "bytes of host memory for a second KV tier that evicted blocks move to and load back "
                        "from (0 = no tier); accepts a suffix: 512M, 2G",
    "kv_offload_dtype": "second KV tier's form: auto (the pool's dtype, lossless) | bfloat16 | int8 "
                        "(per-block-and-head scales)",
    "kv_prefetch_horizon": "with a second KV tier: load a demoted job's blocks back this many seconds before "
                           "its tool is expected to return (0 = only when its turn arrives)",
}


def _base_type(tp: object) -> type:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        return args[0]  # type: ignore[return-value]
    return tp  # type: ignore[return-value]


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
    gguf_weights: str = "native"
    kv_cache_dtype: str = "auto"
    device: str = "auto"
    cuda_graphs: bool = True
    seed: int = 0
    block_size: int = 16
    num_kv_blocks: int | None = None
    kv_cache_memory: float | None = None
    gpu_memory_utilization: float = 0.9
    max_num_seqs: int = 64
    max_num_batched_tokens: int | None = None
    max_model_len: int | None = None
    long_prefill_token_threshold: int = 0
    enable_prefix_caching: bool = True
    policy: str = "fcfs"
    # CONTINUUM
    max_pinned_fraction: float = 0.5
    max_pinned_fraction_per_tenant: float = 1.0
    soft_pins: bool = True
    soft_pin_grace: float = 2.0
    ttl_policy: str = "paper"
    pin_threshold: float = 2.0
    reload_cost_profile: str | None = None
    learned_model_path: str | None = None
    profile_reload_cost: bool = True
    infer_jobs: bool = True
    sched_trace: str | None = None
    kv_offload_bytes: str | int = "0"
    kv_offload_dtype: str = "auto"
    kv_prefetch_horizon: float = 2.0

    def __post_init__(self) -> None:
        if self.dtype not in _DTYPES:
            raise ValueError(f"dtype must be one of {_DTYPES}, got {self.dtype!r}")
        if self.gguf_weights not in GGUF_WEIGHTS:
            raise ValueError(f"gguf_weights must be one of {GGUF_WEIGHTS}, got {self.gguf_weights!r}")
        if self.kv_cache_dtype not in KV_CACHE_DTYPES:
            raise ValueError(f"kv_cache_dtype must be one of {KV_CACHE_DTYPES}, got {self.kv_cache_dtype!r}")
        policy_class(self.policy)  # ValueError naming the known policies
        if self.ttl_policy not in TTL_POLICY_NAMES:
            raise ValueError(f"ttl_policy must be one of {TTL_POLICY_NAMES}, got {self.ttl_policy!r}")
        if self.device not in ("auto", "cpu", "cuda") and not self.device.startswith("cuda:"):
            raise ValueError(f"device must be auto, cpu or cuda[:N], got {self.device!r}")
        for name in ("block_size", "max_num_seqs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1")
        if self.max_num_batched_tokens is not None and self.max_num_batched_tokens < 0:
            raise ValueError(f"max_num_batched_tokens must be >= 1, or {MEASURED_TOKEN_BUDGET} to measure it on CPU")
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
        parse_size(str(self.kv_offload_bytes))  # ValueError for a malformed size
        if self.kv_offload_dtype not in OFFLOAD_DTYPES:
            raise ValueError(f"kv_offload_dtype must be one of {OFFLOAD_DTYPES}, got {self.kv_offload_dtype!r}")
        if not self.kv_prefetch_horizon >= 0:
            raise ValueError("kv_prefetch_horizon must be >= 0 seconds")

    @property
    def offload_bytes(self) -> int:
        """``kv_offload_bytes`` in bytes (a plain number or with a K, M, G or T suffix, powers of 1024)."""
        return parse_size(str(self.kv_offload_bytes))

    @classmethod
    def from_kwargs(cls, **kwargs: object) -> EngineConfig:
        """Build from keyword arguments, rejecting unknown names with the list of known ones."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(kwargs) - known)
        if unknown:
            raise ValueError(f"unknown engine option(s) {unknown}; known: {sorted(known)}")
        return cls(**kwargs)  # type: ignore[arg-type]

    @property
    def token_budget(self) -> int:
        """Tokens per step: ``max_num_batched_tokens`` when set, else ``DEFAULT_TOKEN_BUDGET`` (a budget to
        measure is a number only once the engine has measured it: ``with_token_budget``)."""
        if self.measures_token_budget:
            raise ValueError("the token budget is measured when the engine loads the model; read it from there")
        return self.max_num_batched_tokens or DEFAULT_TOKEN_BUDGET

    @property
    def measures_token_budget(self) -> bool:
        """Whether the step's token budget is still to be measured on the loaded model (CPU)."""
        return self.max_num_batched_tokens == MEASURED_TOKEN_BUDGET

    def with_token_budget(self, measured: int | None) -> EngineConfig:
        """This config with a budget to measure replaced by ``measured`` (None: no measurement, as on
        CUDA: ``DEFAULT_TOKEN_BUDGET``), at least ``max_num_seqs`` so every running request can decode
        in one step; a config whose budget is a number is returned as it is."""
        if not self.measures_token_budget:
            return self
        budget = DEFAULT_TOKEN_BUDGET if measured is None else max(measured, self.max_num_seqs)
        return dataclasses.replace(self, max_num_batched_tokens=budget)

    def for_serving(self, device: str) -> EngineConfig:
        """This config as a server on ``device`` ("cpu", "cuda[:N]") runs it: an unset token budget is
        measured on CPU (``MEASURED_TOKEN_BUDGET``) and ``DEFAULT_TOKEN_BUDGET`` elsewhere; a set one is
        kept."""
        if self.max_num_batched_tokens is not None:
            return self
        budget = MEASURED_TOKEN_BUDGET if device == "cpu" else DEFAULT_TOKEN_BUDGET
        return dataclasses.replace(self, max_num_batched_tokens=budget)

    def scheduler_config(self, num_blocks: int, max_model_len: int, num_offload_blocks: int = 0) -> SchedulerConfig:
        """The scheduler's limits: this config's options over a pool of ``num_blocks`` (null block included)
        and a second tier of ``num_offload_blocks``."""
        return SchedulerConfig(
            num_blocks=num_blocks,
            block_size=self.block_size,
            max_num_seqs=self.max_num_seqs,
            max_num_batched_tokens=self.token_budget,
            max_model_len=max_model_len,
            long_prefill_token_threshold=self.long_prefill_token_threshold,
            policy=self.policy,
            enable_prefix_caching=self.enable_prefix_caching,
            max_pinned_fraction=self.max_pinned_fraction,
            max_pinned_fraction_per_tenant=self.max_pinned_fraction_per_tenant,
            soft_pins=self.soft_pins,
            soft_pin_grace=self.soft_pin_grace,
            num_offload_blocks=num_offload_blocks,
            prefetch_horizon=self.kv_prefetch_horizon,
        )

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser, names: Sequence[str] | None = None,
                      defaults: Mapping[str, object] | None = None, title: str = "engine options") -> None:
        """Add one ``--flag`` per field (or per field of ``names``, in that order) with its type, help
        text and default; a command that runs at another scale gives its own default for a field in
        ``defaults`` (the help says so). ``ValueError`` for a name that is not a field.

        This is the one definition of every engine flag: the server, the simulator and the
        benchmarks all add theirs here, so a flag's name, type, help and default never drift."""
        known = {f.name: f for f in fields(cls)}
        chosen = list(known) if names is None else list(names)
        overrides = dict(defaults or {})
        if unknown := sorted(set(chosen) - set(known)):
            raise ValueError(f"not engine options: {unknown}")
        if stray := sorted(set(overrides) - set(chosen)):
            raise ValueError(f"defaults given for flags not added: {stray}")
        hints = typing.get_type_hints(cls)
        g = parser.add_argument_group(title)
        for name in chosen:
            flag = "--" + name.replace("_", "-")
            tp = _base_type(hints[name])
            default = overrides.get(name, known[name].default)
            note = f"default: {default}"
            if name in overrides:
                note += f"; the engine's: {known[name].default}"
            helptext = f"{_HELP.get(name, '')} ({note})"
            if tp is bool:
                g.add_argument(flag, action=argparse.BooleanOptionalAction, default=default, help=helptext)
            else:
                g.add_argument(flag, type=tp, default=default, help=helptext)

    @classmethod
    def from_args(cls, args: argparse.Namespace, names: Sequence[str] | None = None) -> EngineConfig:
        """The config from parsed flags: every field ``args`` has (or only those of ``names``, for a
        command whose other flags share a field's name); the rest keep their defaults."""
        chosen = [f.name for f in fields(cls)] if names is None else names
        return cls.from_kwargs(**{name: getattr(args, name) for name in chosen if hasattr(args, name)})

