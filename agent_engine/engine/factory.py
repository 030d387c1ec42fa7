"""Builds an engine's parts from an ``EngineConfig``: model, runner, KV pool size, scheduler config,
the estimator's job hooks and the optional scheduler trace. Kept apart so ``LLMEngine`` stays about
the step."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from agent_engine.config import EngineConfig
from agent_engine.engine.job_hooks import JobHooks
from scheduler import Clock, SchedulerConfig
from scheduler.tier_copy import KVBlockShape, store_block_bytes, tier_blocks

if TYPE_CHECKING:  # torch and transformers load only when an engine is built
    import torch
    from transformers import PretrainedConfig

    from agent_engine.model.loader import LoadedModel
    from agent_engine.model.runner import ModelRunner

logger = logging.getLogger(__name__)

_GIB = 1024**3
_DEFAULT_CPU_KV_GIB = 1.0
T = TypeVar("T")


TraceSink = Callable[[dict[str, object]], None]


@dataclass(frozen=True)
class EngineParts:
    """What ``LLMEngine`` is assembled from: the model and its runner, the scheduler's limits and hooks."""

    config: EngineConfig  # as given, with a budget to measure replaced by the measured one
    loaded: LoadedModel
    runner: ModelRunner
    sched_config: SchedulerConfig
    job_hooks: JobHooks
    trace_sink: TraceSink | None
    close_trace: Callable[[], None] | None


def run_on_own_thread(fn: Callable[[], T]) -> T:
    """``fn()`` on a thread of its own that ends when it returns: its result, or its exception raised here.

    A server builds its engine this way, so that no thread that lives on (the main thread, a pool's
    thread) ever ran a parallel torch op: libgomp keeps an OpenMP thread pool per thread that ran one,
    and once its pools hold more threads than the machine has cores it stops spinning between
    parallel regions, so every region of the engine thread wakes sleeping workers (on 2 cores a
    decode step took 1.6x as long, a short prefill 1.7x). A pool ends with its thread: afterwards the
    engine thread's pool is the only one."""
    result: list[T] = []
    error: list[BaseException] = []

    def call() -> None:
        try:
            result.append(fn())
        except BaseException as exc:  # handed to the caller
            error.append(exc)

    thread = threading.Thread(target=call, name="engine-builder")
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return result[0]


def resolve_device(device: str) -> str:
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError("device 'cuda' requested but CUDA is not available")
    return device


def serving_config(config: EngineConfig) -> EngineConfig:
    """``config`` as a server runs it on the device it resolves to (``EngineConfig.for_serving``)."""
    return config.for_serving(resolve_device(config.device))


def num_kv_blocks_for(config: EngineConfig, bytes_per_block: int, device: str) -> int:
    """Pool size in blocks (including the null block) from the config's sizing rule."""
    if config.num_kv_blocks is not None:
        return config.num_kv_blocks
    if config.kv_cache_memory is not None:
        budget = config.kv_cache_memory * _GIB
    elif device.startswith("cuda"):
        import torch

        free, total = torch.cuda.mem_get_info()
        budget = max(0.0, free - (1 - config.gpu_memory_utilization) * total)
    else:
        budget = _DEFAULT_CPU_KV_GIB * _GIB
    n = int(budget // bytes_per_block)
    if n < 2:
        raise ValueError(f"KV cache budget of {budget / _GIB:.3f} GiB holds fewer than 2 blocks")
    return n


def num_offload_blocks_for(config: EngineConfig, model_config: PretrainedConfig, bytes_per_block: int,
                           dtype: torch.dtype) -> int:
    """Blocks the second KV tier holds in ``kv_offload_bytes`` (0: no tier) in its chosen form, for a pool
    of ``bytes_per_block`` in ``dtype`` (``scheduler.tier_copy.tier_blocks``)."""
    from agent_engine.model.runner import kv_shape_from_config

    if not config.offload_bytes:
        return 0
    if not config.enable_prefix_caching:
        raise ValueError("a second KV tier needs prefix caching (its entries are found by block hash)")
    num_layers, num_kv_heads, _ = kv_shape_from_config(model_config)
    block = KVBlockShape(bytes_per_block, dtype.itemsize, num_layers, num_kv_heads)
    n = tier_blocks(config.offload_bytes, block, config.kv_offload_dtype)
    if n < 1:
        per_block = store_block_bytes(block, config.kv_offload_dtype)
        raise ValueError(f"kv_offload_bytes {config.offload_bytes} holds no block ({per_block:g} bytes each)")
    return n


def build_engine_parts(config: EngineConfig, clock: Clock) -> EngineParts:
    """The engine's parts; a bad ``AGENT_ENGINE_ISA`` is a ``ValueError`` before the model loads."""
    import torch

    from agent_engine.engine.step_budget import WIDTHS, measured_budget, model_shape
    from agent_engine.model.loader import load_model
    from agent_engine.model.runner import ModelRunner
    from kernels.cpp_build import check_forced_variant

    check_forced_variant()  # not seconds later, at the model load's first kernel call
    torch.manual_seed(config.seed)
    device = resolve_device(config.device)
    loaded = load_model(config.model, dtype=config.dtype, device=device, gguf_weights=config.gguf_weights)
    kv_dtype = ModelRunner.kv_dtype_for(loaded.model, config.kv_cache_dtype)
    bpb = ModelRunner.kv_cache_bytes_per_block(loaded.model.config, config.block_size, kv_dtype)
    num_blocks = num_kv_blocks_for(config, bpb, device)
    pool_tokens = (num_blocks - 1) * config.block_size
    max_len = config.max_model_len or min(loaded.max_position_embeddings, pool_tokens)
    if max_len > pool_tokens:
        raise ValueError(
            f"max_model_len {max_len} does not fit the KV pool of {pool_tokens} tokens; "
            "raise --num-kv-blocks / --kv-cache-memory or lower --max-model-len"
        )
    if max_len > loaded.max_position_embeddings:
        raise ValueError(f"max_model_len {max_len} exceeds the model's {loaded.max_position_embeddings} positions")
    num_offload = num_offload_blocks_for(config, loaded.model.config, bpb, kv_dtype)
    runner = ModelRunner(loaded.model, num_kv_blocks=num_blocks, block_size=config.block_size, device=device,
                         seed=config.seed, num_offload_blocks=num_offload, offload_dtype=config.kv_offload_dtype,
                         kv_cache_dtype=config.kv_cache_dtype, quantized=loaded.quantized,
                         decode_graph_rows=config.max_num_seqs if config.cuda_graphs else 0,
                         max_step_rows=max(*WIDTHS, config.max_num_seqs) if config.measures_token_budget
                         else config.token_budget)
    config = config.with_token_budget(measured_budget(runner, model_shape(loaded, runner), max_len).budget
                                      if device == "cpu" and config.measures_token_budget else None)
    sched_config = config.scheduler_config(num_blocks, max_len, num_offload)
    tracker = JobHooks.build(config, clock, runner)
    sink, close = _trace_writer(config.sched_trace)
    logger.info("engine: model=%s weights=%s device=%s dtype=%s kv_dtype=%s kv_blocks=%d offload_blocks=%d block_size=%d "
                "max_model_len=%d tokens_per_step=%d policy=%s", loaded.name,
                "gguf-native" if loaded.quantized is not None else "float", device, config.dtype, kv_dtype, num_blocks,
                num_offload, config.block_size, max_len, config.token_budget, config.policy)
    return EngineParts(config, loaded, runner, sched_config, tracker, sink, close)


def _trace_writer(path: str | None) -> tuple[TraceSink | None, Callable[[], None] | None]:
    """A JSONL sink for scheduler events; (None, None) when tracing is off (zero cost)."""
    if not path:
        return None, None
    f = open(path, "w", buffering=1 << 16)  # noqa: SIM115 - closed by LLMEngine.close

    def sink(event: dict[str, object]) -> None:
        f.write(json.dumps(event) + "\n")

    return sink, f.close
