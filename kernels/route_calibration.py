"""Where a CPU prefill chunk's attention leaves the C++ tiles for SDPA, measured on this CPU.

Two routes compete for a prefill chunk (``kernels.paged_attention.paged_attention_cpp``): the C++
kernel's register-blocked tiles read straight from the paged cache, and torch's SDPA (a causal call on a
fresh chunk's own keys; a masked call over a chunk's gathered blocks when it has cached context). Which
wins depends on the CPU (vector width, cache sizes), the build, the thread count and the head shape, so
no crossover measured on one machine is applied to another: the first chunk of a head shape on a new
(CPU model, features, kernel build, torch, threads) measures both routes over a ladder of chunk lengths
(about a second), and the result is cached on disk; ``agent-engine bench kernels --calibrate`` measures
again.

Invariants:
- The SDPA route takes a length only from :func:`crossover` on (SDPA wins by more than ``MARGIN`` there
  and at every longer measured length); ``NEVER`` when it does not win at the longest.
- A cached calibration is used only under the exact key it was measured under (``kernels.
  calibration_store``); an unreadable one, or one outside physical bounds (a timing negative, not
  finite or over a minute; a crossover not one of its measured lengths), is measured again.
- Calibration never changes results beyond float32 rounding (both routes compute the same attention;
  the tests compare them), except over a bfloat16 cache where the build multiplies bfloat16
  (AVX512_BF16): there the C++ tiles round the query and the softmax's numerators to bfloat16
  (``attend_tiled_bf16.h``) and SDPA does not. A calibration is per cache dtype too
  (``HeadShape.cache_dtype``): a bfloat16 cache's tiles read half the bytes and SDPA widens them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from kernels.calibration_store import (
    NEVER,
    RouteTable,
    checked_ms,
    checked_threshold,
    crossover_size,
    store_key,
    store_path,
)
from kernels.timing import best_seconds_each

FRESH_LENGTHS = (16, 32, 64, 128, 256, 512, 1024, 2048)  # fresh chunks (no cached context)
CONTEXT_LENGTHS = (4, 8, 16, 32, 64, 128, 256, 512)  # chunks over CONTEXT cached tokens
CONTEXT = 1024
MARGIN = 0.05  # SDPA must be this much faster to take a length
REPEATS = 3
VERSION = 1  # bump when the measurement changes


@dataclass(frozen=True)
class HeadShape:
    """The attention shape a calibration is for: query heads, KV heads, head dim, dtype name (the
    queries'), and the KV cache's dtype name where it differs (None: the queries')."""

    num_q_heads: int
    num_kv_heads: int
    head_dim: int
    dtype: str = "float32"
    cache_dtype: str | None = None


@dataclass(frozen=True)
class SdpaRoutes:
    """Chunk lengths from which a prefill chunk goes to SDPA: fresh, and over cached context."""

    min_fresh_query: int
    min_context_query: int


@dataclass(frozen=True)
class Calibration:
    """One measured calibration: the routes and the milliseconds per length behind them."""

    routes: SdpaRoutes
    fresh_ms: dict[str, tuple[float, float]]  # length -> (C++ ms, SDPA ms)
    context_ms: dict[str, tuple[float, float]]
    key: str
    measured_at: str


def crossover(lengths: Sequence[int], cpp_s: Sequence[float], sdpa_s: Sequence[float],
              margin: float = MARGIN) -> int:
    """The shortest length from which SDPA beats the C++ route by ``margin`` at every longer length
    too (lengths ascending); ``NEVER`` when SDPA does not win at the longest."""
    return crossover_size(lengths, cpp_s, sdpa_s, margin)


def cache_key(shape: HeadShape, threads: int) -> str:
    """What a calibration depends on (``kernels.calibration_store.store_key``) for this head shape (a
    shape whose cache is in the queries' dtype keeps the key it had before caches had their own)."""
    fields = asdict(shape)
    if shape.cache_dtype is None:
        del fields["cache_dtype"]
    return store_key("attention", VERSION, fields, threads)


def cache_file(shape: HeadShape, threads: int) -> Path:
    return store_path(cache_key(shape, threads))


# The attention under calibration: ``kernels.paged_attention.paged_attention_cpp``'s signature
# (query, key, value, k_cache, v_cache, metadata, scale, routes), passed in by its module.
Attend = Callable[..., torch.Tensor]


def _time_both(shape: HeadShape, query_len: int, context: int, attend: Attend) -> tuple[float, float]:
    """Seconds of one chunk of ``query_len`` tokens over ``context`` cached tokens by each route."""
    from kernels.attention_metadata import build_attention_metadata
    from kernels.kv_cache import write_kv_cache

    dtype = getattr(torch, shape.dtype)
    cache_dtype = getattr(torch, shape.cache_dtype or shape.dtype)
    gen = torch.Generator().manual_seed(query_len + context)
    block = 16
    blocks = -(-(query_len + context) // block)
    k_cache, v_cache = (torch.randn(blocks + 1, block, shape.num_kv_heads, shape.head_dim,
                                    generator=gen).to(cache_dtype) for _ in range(2))  # block 0: the null block
    meta = build_attention_metadata([query_len], [context], [list(range(1, blocks + 1))], block)
    q, k, v = (torch.randn(query_len, h, shape.head_dim, generator=gen).to(dtype)
               for h in (shape.num_q_heads, shape.num_kv_heads, shape.num_kv_heads))
    write_kv_cache(k, v, k_cache, v_cache, meta.slot_mapping)
    scale = shape.head_dim ** -0.5

    def by(routes: SdpaRoutes) -> Callable[[], object]:
        return lambda: attend(q, k, v, k_cache, v_cache, meta, scale, routes)

    cpp, sdpa = best_seconds_each([by(SdpaRoutes(NEVER, NEVER)), by(SdpaRoutes(1, 1))], REPEATS)
    return cpp, sdpa


def _as_ms(lengths: Sequence[int], seconds: Sequence[tuple[float, float]]) -> dict[str, tuple[float, float]]:
    return {str(n): (cpp * 1e3, sdpa * 1e3) for n, (cpp, sdpa) in zip(lengths, seconds, strict=True)}


def measure(shape: HeadShape, attend: Attend) -> Calibration:
    """Both routes of ``attend`` over the length ladders on this CPU, now (about a second on 2 cores)."""
    fresh = [_time_both(shape, n, 0, attend) for n in FRESH_LENGTHS]
    ctx = [_time_both(shape, n, CONTEXT, attend) for n in CONTEXT_LENGTHS]
    routes = SdpaRoutes(crossover(FRESH_LENGTHS, [c for c, _ in fresh], [s for _, s in fresh]),
                        crossover(CONTEXT_LENGTHS, [c for c, _ in ctx], [s for _, s in ctx]))
    return Calibration(routes, _as_ms(FRESH_LENGTHS, fresh), _as_ms(CONTEXT_LENGTHS, ctx),
                       cache_key(shape, torch.get_num_threads()), time.strftime("%Y-%m-%dT%H:%M:%S"))


def _parse(data: dict) -> Calibration:
    """A stored calibration, if within bounds (``calibration_store.checked_ms``, ``checked_threshold``)."""
    fresh, context = checked_ms(data["fresh_ms"], (2,)), checked_ms(data["context_ms"], (2,))
    routes = data["routes"]
    return Calibration(SdpaRoutes(checked_threshold(routes["min_fresh_query"], fresh),
                                  checked_threshold(routes["min_context_query"], context)),
                       fresh, context, data["key"], data["measured_at"])


_routes: RouteTable[HeadShape, SdpaRoutes] = RouteTable("where attention leaves the C++ tiles for SDPA")


def calibrate(shape: HeadShape, attend: Attend, remeasure: bool = False) -> Calibration:
    """This CPU's calibration of ``attend`` for ``shape`` at the current thread count: from the cache file
    unless ``remeasure``, else measured now and written."""
    return _routes.calibrate(shape, lambda threads: cache_key(shape, threads), _parse, lambda: measure(shape, attend),
                             lambda cal: cal.routes, remeasure)


def sdpa_routes(shape: HeadShape, attend: Attend) -> SdpaRoutes:
    """The routes of ``attend`` for ``shape`` (cached in the process, then on disk, else measured once)."""
    routes = _routes.get(shape, None)
    if routes is None:
        routes = calibrate(shape, attend).routes
    return routes
