"""Engine flags generated from ``EngineConfig``'s fields, so the CLI and the config never drift."""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing

from agent_engine.config import EngineConfig

_HELP = {
    "model": "local HF folder (config.json, safetensors, tokenizer.json); default: the embedded model",
    "served_model_name": "model name reported by the API (default: folder name)",
    "dtype": "float32 | bfloat16 | float16 | auto",
    "device": "auto | cpu | cuda[:N]",
    "seed": "engine seed for sampling without a per-request seed",
    "block_size": "tokens per KV block",
    "num_kv_blocks": "KV pool size in blocks (overrides --kv-cache-memory)",
    "kv_cache_memory": "KV pool size in GiB (default 1 GiB on CPU, a fraction of free memory on CUDA)",
    "gpu_memory_utilization": "fraction of GPU memory the engine may use (CUDA only)",
    "max_num_seqs": "most requests running at once",
    "max_num_batched_tokens": "token budget per step (prefill chunks + decodes)",
    "max_model_len": "longest prompt + output (default: model limit, capped by the KV pool)",
    "long_prefill_token_threshold": "most prompt tokens one request may prefill per step (0 = no cap)",
    "enable_prefix_caching": "reuse KV blocks of identical prefixes",
    "policy": "fcfs | priority | continuum",
    "max_pinned_fraction": "CONTINUUM: most of the KV pool that pins may hold",
    "soft_pins": "CONTINUUM: hold the part of a pin past the cap as a soft tail that yields to running "
                 "requests and earlier jobs' admissions (only later jobs wait for it)",
    "soft_pin_grace": "CONTINUUM with soft pins: seconds an expired pin stays soft before it ends (0 = none)",
    "ttl_policy": "CONTINUUM: fixed | paper | learned",
    "pin_threshold": "CONTINUUM fixed policy: pin seconds (and the mean-duration cut-off)",
    "reload_cost_profile": "CONTINUUM: JSON reload-cost profile instead of profiling at start-up",
    "learned_model_path": "CONTINUUM learned policy: model from `agent-engine estimator fit`",
    "profile_reload_cost": "CONTINUUM paper policy: time prefill at start-up to fit R(ctx)",
    "sched_trace": "write a JSONL scheduler trace to this path (off by default)",
}


def _base_type(tp: object) -> type:
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        return args[0]  # type: ignore[return-value]
    return tp  # type: ignore[return-value]


def add_engine_args(parser: argparse.ArgumentParser) -> None:
    """Add one ``--flag`` per EngineConfig field, with its default and help text."""
    hints = typing.get_type_hints(EngineConfig)
    g = parser.add_argument_group("engine options")
    for f in dataclasses.fields(EngineConfig):
        flag = "--" + f.name.replace("_", "-")
        tp = _base_type(hints[f.name])
        helptext = _HELP.get(f.name, "")
        if tp is bool:
            g.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default,
                           help=f"{helptext} (default: {f.default})")
        else:
            g.add_argument(flag, type=tp, default=f.default, help=f"{helptext} (default: {f.default})")


def engine_config_from_args(args: argparse.Namespace) -> EngineConfig:
    kw = {f.name: getattr(args, f.name) for f in dataclasses.fields(EngineConfig) if hasattr(args, f.name)}
    return EngineConfig(**kw)
