"""Where a matmul on GGUF blocks leaves the int8 dot products for dequantized float32 panels, measured
on this CPU.

A matmul on a GGUF file's own blocks (``kernels.quant``) has two routes, both reading the one quantized
copy: ``gguf_linear_int8`` rounds the activations to int8 per block and takes integer dot products, a
weight row unpacked once per few rows of ``x`` (the decode route: few rows, bound by reading the
weights); ``gguf_linear_wide`` dequantizes the weights a block of K at a time into float32 and runs the
panel micro-kernel over every row of ``x`` (the wide route: prefill chunks, many streams, bound by
the FMA units; where the kernels have bfloat16 products, ``cpp_build.bf16_products()``, it has a
second form that rounds both operands to bfloat16 and multiplies them in ``vdpbf16ps`` pairs). Where
they cross depends on the CPU (vector width, VNNI, caches), the build, the
thread count and the weight's shape and types, so it is measured, never assumed: :func:`prepare` times
both routes (the wide one in each form the build has, :func:`wide_forms`: float32, bfloat16 products
where the CPU has AVX512_BF16, and AMX tiles, ``gguf_linear_tiles``, where the tiles are granted) on
the model's own weights over a ladder of row counts when it loads, caches the result
per CPU, build, torch, threads and shape (``kernels.calibration_store``), and :func:`wide_route`
answers a matmul's question in one dict lookup. ``agent-engine bench kernels --calibrate`` measures
again and prints the table.

A third form serves prefill widths where the CPU multiplies bfloat16 natively
(``kernels.onednn_wide``: the weights dequantized to bfloat16 a chunk at a time, oneDNN's matmul; on
a CPU with AMX granted, in tiles): it is timed against the route ``ONEDNN_ROWS`` rows would take and
takes every step from ``ONEDNN_ROWS`` rows on where it is faster there by ``MARGIN`` (its one extra
cost, a pass over the weight, shrinks per row as the rows grow, so a win at ``ONEDNN_ROWS`` holds
above).

Invariants:
- :func:`wide_route` never measures: a shape nobody prepared stays on the int8 route.
- The wide form is the fastest of :func:`wide_forms` over the ladder's total time (the wide rows' cost
  is the large row counts'), and float32 unless that one beat float32 by ``MARGIN``; ``wide_from`` is
  then where that form beats the int8 route. The tile form is timed only where
  ``amx.tiles_ready()``.
- The ladder always holds the decode widths (up to ``DECODE_ROWS``: a vocabulary-sized LM head runs at
  every decode step's width, and 32 or 64 streams are where its route turns) and stops past them where
  one call would exceed ``FLOP_BUDGET``; larger row counts follow the largest measured one.
- The wide route is ``x @ dequantize()^T`` up to float32 summation order (in its bfloat16 and tile
  forms, of both operands rounded to bfloat16, denormals flushed; in the oneDNN form the product rounded to
  bfloat16 as well); the int8 route adds the rounding of ``x`` to 8 bits. The choice changes speed
  and that rounding only.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch

from kernels.amx import tiles_ready
from kernels.calibration_store import (
    NEVER,
    RouteTable,
    checked_ms,
    checked_threshold,
    crossover_size,
    store_key,
)
from kernels.cpp_build import bf16_products
from kernels.onednn_wide import available as onednn_available
from kernels.onednn_wide import onednn_wide
from kernels.timing import best_seconds_each

ROWS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)  # row counts timed, ascending
DECODE_ROWS = 64  # row counts up to this are always timed
FLOP_BUDGET = 4e9  # no timed call past this many floating-point operations beyond DECODE_ROWS
MARGIN = 0.05  # the wide route must be this much faster to take a row count
REPEATS = 5
ONEDNN_REPEATS = 3  # the oneDNN form's two timed calls are a prefill step's, each long enough
ONEDNN_ROWS = 256  # the oneDNN form is timed at this width (a prefill step's)
VERSION = 5  # bump when the measurement changes


@dataclass(frozen=True)
class QuantShape:
    """A fused matmul on GGUF blocks: its input width and, per part, (GGML type, output features)."""

    in_features: int
    parts: tuple[tuple[int, int], ...]

    @property
    def out_features(self) -> int:
        return sum(n for _, n in self.parts)


@dataclass(frozen=True)
class WideRoute:
    """A shape's route: the wide one from ``from_rows`` rows on (``NEVER``: always int8), in bfloat16
    products when ``bf16`` (else float32), in AMX tiles when ``tiles`` (bfloat16 products too), and
    the oneDNN form from ``onednn_from`` rows on."""

    from_rows: int
    bf16: bool = False
    onednn_from: int = NEVER
    tiles: bool = False


INT8_ONLY = WideRoute(NEVER)


@dataclass(frozen=True)
class QuantCalibration:
    """One measurement: the wide route from this many rows on, in which form, and the ms per row count
    behind it."""

    wide_from: int
    wide_bf16: bool
    ms: dict[str, tuple[float, ...]]  # rows -> (int8 ms, float32 wide ms[, bfloat16 wide ms[, tiles ms]])
    key: str
    measured_at: str
    onednn_from: int = NEVER  # ONEDNN_ROWS or NEVER
    onednn_ms: dict[str, tuple[float, ...]] | None = None  # {ONEDNN_ROWS: (the route's ms, oneDNN's ms)}
    wide_tiles: bool = False  # the wide route in AMX tiles (then wide_bf16 too: its products are bfloat16)

    @property
    def route(self) -> WideRoute:
        return WideRoute(self.wide_from, self.wide_bf16, self.onednn_from, self.wide_tiles)


def cache_key(shape: QuantShape, threads: int, onednn: bool = True) -> str:
    """The store key of ``shape``'s calibration (with or without its oneDNN form)."""
    fields: dict[str, object] = {"in_features": shape.in_features, "parts": [list(p) for p in shape.parts]}
    if not onednn:
        fields["onednn"] = False
    return store_key("quant", VERSION, fields, threads)


def ladder(shape: QuantShape) -> tuple[int, ...]:
    """The row counts timed for ``shape``: ``ROWS`` up to ``DECODE_ROWS``, then up to the ``FLOP_BUDGET``."""
    flops_per_row = 2 * shape.out_features * shape.in_features
    return tuple(r for r in ROWS if r <= DECODE_ROWS or r * flops_per_row <= FLOP_BUDGET)


def wide_forms() -> tuple[str, ...]:
    """The forms of the wide route this build and CPU have, in the order of a calibration's columns:
    float32; bfloat16 products (AVX512_BF16 kernels); AMX tiles (those kernels, and tiles granted)."""
    if not bf16_products():
        return ("float32",)
    return ("float32", "bfloat16", "tiles") if tiles_ready() else ("float32", "bfloat16")


def run_wide(form: str, out: torch.Tensor, x: torch.Tensor, raws: Sequence[torch.Tensor], qtypes: Sequence[int]) -> None:
    """The wide route's kernel in ``form`` (a name of :func:`wide_forms`)."""
    from kernels.cpp_build import ops

    if form == "tiles":
        ops().gguf_linear_tiles(out, x, list(raws), list(qtypes), False)
    else:
        ops().gguf_linear_wide(out, x, list(raws), list(qtypes), form == "bfloat16")


def measure(shape: QuantShape, raws: Sequence[torch.Tensor], onednn: bool = True) -> QuantCalibration:
    """Both routes over ``ladder(shape)`` on this CPU, now, on the weight blocks ``raws`` (one per part),
    the wide one in each of its :func:`wide_forms` (the fastest over the ladder's total, if it beats
    float32's by ``MARGIN``), and the oneDNN form unless ``onednn`` is False (or this CPU has it not:
    ``onednn_available``)."""
    from kernels.cpp_build import ops

    qtypes = [q for q, _ in shape.parts]
    gen = torch.Generator().manual_seed(shape.in_features * 7919 + shape.out_features)
    forms = wide_forms()
    rows, seconds = ladder(shape), []
    for n in rows:
        x = torch.randn(n, shape.in_features, generator=gen)
        out = x.new_empty(n, shape.out_features)
        routes = [lambda x=x, out=out: ops().gguf_linear_int8(out, x, list(raws), qtypes)]
        routes += [lambda x=x, out=out, form=form: run_wide(form, out, x, raws, qtypes) for form in forms]
        seconds.append(tuple(best_seconds_each(routes, REPEATS)))
    totals = [sum(s[1 + i] for s in seconds) for i in range(len(forms))]
    best = min(range(len(forms)), key=totals.__getitem__)
    chosen = best if totals[best] < (1 - MARGIN) * totals[0] else 0
    wide = [s[1 + chosen] for s in seconds]
    first = crossover_size(rows, [s[0] for s in seconds], wide, MARGIN)
    bf16, tiles = forms[chosen] != "float32", forms[chosen] == "tiles"
    onednn_from, onednn_ms = _measure_onednn(shape, raws, WideRoute(first, bf16, tiles=tiles), gen) \
        if onednn and onednn_available() else (NEVER, None)
    return QuantCalibration(first, bf16, {str(n): tuple(t * 1e3 for t in s) for n, s in zip(rows, seconds, strict=True)},
                            cache_key(shape, torch.get_num_threads(), onednn), time.strftime("%Y-%m-%dT%H:%M:%S"),
                            onednn_from, onednn_ms, tiles)


def _measure_onednn(shape: QuantShape, raws: Sequence[torch.Tensor], route: WideRoute,
                    gen: torch.Generator) -> tuple[int, dict[str, tuple[float, ...]]]:
    """The oneDNN form against ``route`` at ``ONEDNN_ROWS`` rows: (``ONEDNN_ROWS`` if it wins by
    ``MARGIN``, else ``NEVER``; their ms)."""
    from kernels.cpp_build import ops

    qtypes = [q for q, _ in shape.parts]
    x = torch.randn(ONEDNN_ROWS, shape.in_features, generator=gen)
    out = x.new_empty(ONEDNN_ROWS, shape.out_features)
    if ONEDNN_ROWS >= route.from_rows:
        form = "tiles" if route.tiles else "bfloat16" if route.bf16 else "float32"
        current = lambda: run_wide(form, out, x, raws, qtypes)  # noqa: E731
    else:
        current = lambda: ops().gguf_linear_int8(out, x, list(raws), qtypes)  # noqa: E731
    now, by_onednn = best_seconds_each([current, lambda: onednn_wide(out, x, raws, qtypes)], ONEDNN_REPEATS)
    wins = by_onednn * (1 + MARGIN) < now
    return (ONEDNN_ROWS if wins else NEVER), {str(ONEDNN_ROWS): (now * 1e3, by_onednn * 1e3)}


def _parse(data: dict) -> QuantCalibration:
    """A stored calibration, if within bounds (``calibration_store``; the bfloat16 form only where the
    build has it)."""
    ms = checked_ms(data["ms"], (2, 3, 4))
    bf16, tiles = data["wide_bf16"], data.get("wide_tiles", False)
    if not isinstance(bf16, bool) or (bf16 and not bf16_products()):
        raise ValueError(f"wide_bf16 {bf16!r} is not a form this build has")
    if not isinstance(tiles, bool) or (tiles and ("tiles" not in wide_forms() or not bf16)):
        raise ValueError(f"wide_tiles {tiles!r} is not a form this build and CPU have")
    onednn_ms = data.get("onednn_ms")
    onednn_from = data.get("onednn_from", NEVER)
    if onednn_ms is not None:
        onednn_ms = checked_ms(onednn_ms, (2,))
        if set(onednn_ms) != {str(ONEDNN_ROWS)}:
            raise ValueError(f"the oneDNN form is timed at {ONEDNN_ROWS} rows, not {sorted(onednn_ms)}")
        onednn_from = checked_threshold(onednn_from, onednn_ms)
    elif onednn_from != NEVER:
        raise ValueError("a oneDNN route without its timing")
    return QuantCalibration(checked_threshold(data["wide_from"], ms), bf16, ms, data["key"], data["measured_at"],
                            onednn_from, onednn_ms, tiles)


_routes: RouteTable[QuantShape, WideRoute] = RouteTable("where a GGUF matmul leaves the int8 route")


def calibrate(shape: QuantShape, raws: Sequence[torch.Tensor], remeasure: bool = False,
              onednn: bool = True) -> QuantCalibration:
    """This CPU's calibration for ``shape`` at the current thread count: from the cache unless
    ``remeasure``, else measured now on ``raws`` and stored; without its oneDNN form where ``onednn`` is
    False (a key of its own)."""
    return _routes.calibrate(shape, lambda threads: cache_key(shape, threads, onednn), _parse,
                             lambda: measure(shape, raws, onednn), lambda cal: cal.route, remeasure)


def prepare(matmuls: Iterable[tuple[QuantShape, Sequence[torch.Tensor]]], onednn: bool = True) -> None:
    """Calibrate every distinct shape of ``(shape, raws)`` (cached ones are read, not measured) so that
    ``wide_route`` knows them (``onednn`` False: never the oneDNN form, as for an LM head)."""
    seen: set[QuantShape] = set()
    for shape, raws in matmuls:
        if shape not in seen:
            seen.add(shape)
            calibrate(shape, raws, onednn=onednn)


def wide_route(shape: QuantShape) -> WideRoute:
    """This shape's measured route at the current thread count (``INT8_ONLY`` if unprepared)."""
    return _routes.get(shape, INT8_ONLY)
