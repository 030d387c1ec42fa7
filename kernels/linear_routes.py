"""Where a matmul on a float32 or bfloat16 weight leaves the C++ panels for oneDNN, measured on this CPU.

A matmul of float32 activations on a panel-packed weight (``kernels.cpu_ops.linear``) has two routes:
the C++ ``panel_linear`` on the packed copy, and oneDNN's matmul, on the weight laid out once in
oneDNN's own blocked format for this CPU (:func:`onednn_weight`: AMX's tile layout where the tiles
are granted) where the model keeps that copy, else on the plain weight. The panels
stream the weight once for a decode step's few rows and lead up to a few hundred rows; at prefill
widths oneDNN's blocking can win, by how much depending on the CPU (vector width, caches, matrix
units: on a CPU with AMX whose OS grants the tile state, oneDNN multiplies bfloat16 in AMX tiles,
``kernels.amx``), the build, the thread count and the weight's shape and dtype. So the crossover is
measured, never assumed: :func:`prepare`
times both routes over a ladder of row counts for each weight shape of a model when it loads (a
fraction of a second per shape), caches the result per CPU, build, torch, threads and shape
(``kernels.calibration_store``), and :func:`onednn_from` answers the matmul's question in one dict
lookup. ``agent-engine bench kernels --calibrate`` measures again and prints the table.

oneDNN's matmul on a plain weight copies it into its blocked layout on every call (a pass over the
weight, written: at a decode step's widths it costs as much as the product, and the faster the
product, AMX tiles above all, the larger its share); on the copy :func:`onednn_weight` makes once the
call multiplies straight away, and its products are the plain weight's up to float32 summation
order (a one-row float32 call may sum in another order). The route is timed on that copy, so a model
keeps one for each weight whose shape takes oneDNN from some row count (:func:`takes_onednn`).

Where the CPU has AMX tiles granted and the kernels have bfloat16 products, a bfloat16 weight's pair
panels have a third route: ``panel_linear_tiles`` multiplies them as they lie in AMX tiles (no copy,
float32 out, the SiLU fused for gate/up). It is timed beside the other two and taken from the row
count where it beats the better of them (:class:`LinearRoute`, :func:`linear_form`).

Invariants:
- :func:`onednn_from` never measures: a shape nobody prepared stays on the panels (nothing is timed on
  a serving step's path).
- The ladder stops where one call would exceed ``FLOP_BUDGET`` (a vocabulary-sized LM head is timed
  at a decode step's widths only); larger row counts follow the largest measured one.
- A fused ``[gate; up]`` weight whose panels run with the SiLU (``MatmulShape.gated``) is timed as it
  runs: ``panel_linear_silu`` (the gate/up product never reaches memory) against oneDNN's product
  then ``silu_and_mul`` (a bfloat16 product widened, written and read back): the activation's pass
  and the wider output are part of oneDNN's cost there.
- For a float32 weight both routes compute the same product within float32 summation order (the
  tests compare them). For a bfloat16 weight oneDNN multiplies ``x`` rounded to bfloat16 and rounds
  its product to bfloat16 before widening it back to float32 (the pair panels keep float32 sums):
  the choice changes speed and that one rounding only. The tile route rounds ``x`` to bfloat16 and
  keeps float32 sums, as the pair panels do: it changes their summation order only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from enum import Enum

import torch

from kernels.amx import amx_state, native_bf16, tiles_ready
from kernels.calibration_store import (
    NEVER,
    RouteTable,
    checked_ms,
    checked_threshold,
    crossover_size,
    store_key,
)
from kernels.prepack import PANEL
from kernels.timing import best_seconds_each

ROWS = (1, 8, 32, 64, 128, 256, 512, 1024, 2048)  # row counts timed, ascending
FLOP_BUDGET = 8e9  # no timed call past this many floating-point operations
MARGIN = 0.05  # oneDNN must be this much faster to take a row count
REPEATS = 5
VERSION = 3  # bump when the measurement changes
TILE_K = 32  # the tile route multiplies K in whole tiles of 32
HEAD_DECODE_ROWS = 64  # an LM head is always timed up to this many rows (decode widths)
PREPACK_ROWS = 256  # the row count oneDNN lays an :func:`onednn_weight` out for (any count multiplies by it)
ONEDNN = torch.backends.mkldnn.is_available()
WEIGHT_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}  # the weights with both routes


@dataclass(frozen=True)
class MatmulShape:
    """A weight ``[out_features, in_features]`` of ``dtype`` (a name in ``WEIGHT_DTYPES``); ``logits``: an
    LM head, whose products keep float32 sums (so a bfloat16 head has no oneDNN route, which rounds its
    product to bfloat16: the panels and the tiles only); ``gated``: a
    fused ``[gate; up]`` weight multiplied with its SiLU (``kernels.cpu_ops.gate_up_silu``; its
    intermediate size, half of ``out_features``, a multiple of the panel width)."""

    out_features: int
    in_features: int
    dtype: str = "float32"
    gated: bool = False
    logits: bool = False

    def __post_init__(self) -> None:
        if self.dtype not in WEIGHT_DTYPES:
            raise ValueError(f"a matmul route is measured for {sorted(WEIGHT_DTYPES)} weights, not {self.dtype!r}")
        if self.gated and self.out_features % (2 * PANEL):
            raise ValueError(f"a gated gate/up weight has an intermediate size that is a multiple of {PANEL}: "
                             f"{self.out_features} outputs")

    @classmethod
    def of(cls, weight: torch.Tensor, gated: bool = False, logits: bool = False) -> MatmulShape:
        """The shape of a float32 or bfloat16 ``[N, K]`` weight (``ValueError`` for another dtype)."""
        return cls(weight.shape[0], weight.shape[1], str(weight.dtype).removeprefix("torch."), gated, logits)

    @property
    def route_key(self) -> tuple[int, int, torch.dtype, bool, bool]:
        """What :func:`onednn_from` looks the route up by."""
        return self.out_features, self.in_features, WEIGHT_DTYPES[self.dtype], self.gated, self.logits

    @property
    def onednn_route(self) -> bool:
        """Whether oneDNN is a route for this shape here: :func:`onednn_has` for its dtype, and not a
        bfloat16 LM head (``logits``)."""
        return onednn_has(self.dtype) and not (self.logits and self.dtype == "bfloat16")


class LinearForm(Enum):
    """The kernel a float32 step of some rows multiplies a weight with: :func:`linear_form`'s answer."""

    PANELS = "panels"  # panel_linear (panel_linear_silu for gate/up)
    ONEDNN = "onednn"  # oneDNN's matmul (then silu_and_mul for gate/up)
    TILES = "tiles"  # panel_linear_tiles on the pair panels (AMX)


@dataclass(frozen=True)
class LinearRoute:
    """A shape's route by row count: the panels, oneDNN from ``onednn_from`` rows on, the AMX tiles on
    the panels from ``tiles_from`` rows on (ahead of oneDNN where both would take a row count)."""

    onednn_from: int = NEVER
    tiles_from: int = NEVER

    def at(self, rows: int) -> LinearForm:
        if rows >= self.tiles_from:
            return LinearForm.TILES
        return LinearForm.ONEDNN if rows >= self.onednn_from else LinearForm.PANELS


@dataclass(frozen=True)
class LinearCalibration:
    """One measurement: oneDNN from this many rows on, the tiles from that many, and the ms per row
    count behind them."""

    onednn_from: int
    ms: dict[str, tuple[float, ...]]  # rows -> (panels ms, oneDNN ms[, tiles ms])
    key: str
    measured_at: str
    tiles_from: int = NEVER

    @property
    def route(self) -> LinearRoute:
        return LinearRoute(self.onednn_from, self.tiles_from)


def cache_key(shape: MatmulShape, threads: int) -> str:
    """The store key of ``shape``'s calibration (a field at its default is left out of the key: a float32
    dtype, not gated, not an LM head)."""
    fields = asdict(shape)
    if shape.dtype == "float32":
        del fields["dtype"]
    if not shape.gated:
        del fields["gated"]
    if not shape.logits:
        del fields["logits"]
    return store_key("linear", VERSION, fields, threads)


def onednn_has(dtype: str) -> bool:
    """Whether oneDNN's matmul is a route for ``dtype`` weights here: oneDNN is in this torch, and for
    bfloat16 the CPU multiplies bfloat16 natively (AVX512_BF16, or AMX tiles granted; elsewhere
    oneDNN emulates it slowly or refuses it)."""
    return ONEDNN and (dtype == "float32" or native_bf16())


def tiles_have(shape: MatmulShape) -> bool:
    """Whether the tile route exists for ``shape`` here: a bfloat16 weight (its pair panels: kernels with
    bfloat16 products), AMX tiles granted to this process, K in whole tiles."""
    return shape.dtype == "bfloat16" and shape.in_features % TILE_K == 0 and tiles_ready()


def ladder(shape: MatmulShape) -> tuple[int, ...]:
    """The row counts timed for ``shape``: ``ROWS`` up to the ``FLOP_BUDGET``, at least the first; an LM
    head's always up to ``HEAD_DECODE_ROWS`` (a vocabulary-sized head runs at every decode step's width,
    where its route turns)."""
    flops_per_row = 2 * shape.out_features * shape.in_features
    return tuple(r for i, r in enumerate(ROWS) if i == 0 or r * flops_per_row <= FLOP_BUDGET
                 or (shape.logits and r <= HEAD_DECODE_ROWS))


def measure(shape: MatmulShape) -> LinearCalibration:
    """Every route of ``shape`` over ``ladder(shape)`` on this CPU, now (a gated shape with its SiLU on
    each): the panels, oneDNN (where :func:`onednn_has`), the tiles (where :func:`tiles_have`)."""
    gen = torch.Generator().manual_seed(shape.out_features * 7919 + shape.in_features)
    weight = torch.randn(shape.out_features, shape.in_features, generator=gen).to(WEIGHT_DTYPES[shape.dtype])
    routes = _routes_of(shape, weight)
    rows, seconds = ladder(shape), []
    for n in rows:
        x = torch.randn(n, shape.in_features, generator=gen)
        out = x.new_empty(n, shape.out_features // 2 if shape.gated else shape.out_features)
        calls = [lambda x=x, out=out, route=route: route(x, out) for route in routes if route is not None]
        timed = iter(best_seconds_each(calls, REPEATS))
        seconds.append(tuple(next(timed) if route is not None else float("inf") for route in routes[:2])
                       + tuple(next(timed) for route in routes[2:] if route is not None))
    first = crossover_size(rows, [s[0] for s in seconds], [s[1] for s in seconds], MARGIN)
    tiles_from = NEVER if routes[2] is None else crossover_size(rows, [min(s[0], s[1]) for s in seconds],
                                                                [s[2] for s in seconds], MARGIN)
    return LinearCalibration(first, {str(n): tuple(t * 1e3 for t in s) for n, s in zip(rows, seconds, strict=True)},
                             cache_key(shape, torch.get_num_threads()), time.strftime("%Y-%m-%dT%H:%M:%S"),
                             tiles_from)


def onednn_weight(weight: torch.Tensor) -> torch.Tensor:
    """A float32 or bfloat16 ``[N, K]`` weight copied once into oneDNN's blocked layout for this CPU (an
    opaque oneDNN tensor of the same dtype; AMX's tile layout where the tiles are granted), for
    :func:`onednn_linear`'s ``prepacked``: its products are the plain weight's up to float32 summation order,
    without the per-call copy into that layout."""
    if weight.dim() != 2 or weight.dtype not in WEIGHT_DTYPES.values() or weight.device.type != "cpu":
        raise ValueError(f"oneDNN's layout is made for a float32 or bfloat16 CPU matrix, not a "
                         f"{weight.dtype} {tuple(weight.shape)} on {weight.device}")
    with torch.no_grad():
        return torch.ops.mkldnn._reorder_linear_weight(weight.contiguous(), PREPACK_ROWS)


def onednn_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
                  prepacked: torch.Tensor | None = None) -> torch.Tensor:
    """oneDNN's matmul ``x @ weight^T (+ bias)`` of float32 ``x``, float32 out, on ``prepacked``
    (:func:`onednn_weight` of ``weight``) when given, else on the plain weight: in float32 for a float32
    weight; for a bfloat16 one in bfloat16 (``x`` and the product rounded to it, the bias added in
    float32)."""
    operand = weight if prepacked is None else prepacked
    if weight.dtype == torch.float32:
        return torch.ops.mkldnn._linear_pointwise(x, operand, bias, "none", [], "")
    product = torch.ops.mkldnn._linear_pointwise(x.to(weight.dtype), operand, None, "none", [], "").float()
    return product if bias is None else product.add_(bias)


def _parse(data: dict, shape: MatmulShape) -> LinearCalibration:
    """A stored calibration of ``shape``, if within bounds (``calibration_store``; oneDNN's column is
    infinite only where oneDNN is no route for its dtype here, ``onednn_has``; a tiles column only
    where :func:`tiles_have`)."""
    ms = checked_ms(data["ms"], (3,) if tiles_have(shape) else (2,), () if shape.onednn_route else (1,))
    cal = LinearCalibration(checked_threshold(data["onednn_from"], ms), ms, data["key"], data["measured_at"],
                            checked_threshold(data.get("tiles_from", NEVER), ms))
    if not shape.onednn_route and (cal.onednn_from != NEVER or any(row[1] != float("inf") for row in ms.values())):
        raise ValueError("a oneDNN route for a shape oneDNN is no route of")
    if not tiles_have(shape) and cal.tiles_from != NEVER:
        raise ValueError("a tile route for a shape the tiles are no route of here")
    return cal


# (out, in, dtype, gated, logits) -> its route by row count: keyed by the weight's shape, looked up on every matmul
_routes: RouteTable[tuple[int, int, torch.dtype, bool, bool], LinearRoute] = RouteTable(
    "where a matmul leaves the panels for oneDNN or the tiles")


Route = Callable[[torch.Tensor, torch.Tensor], object]


def _routes_of(shape: MatmulShape, weight: torch.Tensor) -> tuple[Route, Route | None, Route | None]:
    """The panel, oneDNN and tile routes of ``shape`` on ``weight`` (None where this CPU has it not:
    :func:`onednn_has`, :func:`tiles_have`), each ``(x, out) -> None`` writing what the matmul's caller
    gets (for a gated shape, the activation) into ``out``."""
    from kernels.cpp_build import ops
    from kernels.prepack import pack_gate_up, pack_weight

    panels = pack_gate_up(weight, shape.out_features // 2) if shape.gated else pack_weight(weight)
    tiles: Route | None = None
    if tiles_have(shape):
        tiles = lambda x, out: ops().panel_linear_tiles(out, x, panels, shape.gated, False)  # noqa: E731
    if not shape.onednn_route:
        onednn: Route | None = None
    elif shape.gated:
        blocked = onednn_weight(weight)
        onednn = lambda x, out: ops().silu_and_mul(out, onednn_linear(x, weight, prepacked=blocked))  # noqa: E731
    else:
        blocked = onednn_weight(weight)
        onednn = lambda x, out: onednn_linear(x, weight, prepacked=blocked)  # noqa: E731
    if shape.gated:
        return lambda x, out: ops().panel_linear_silu(out, x, panels), onednn, tiles
    return lambda x, out: ops().panel_linear(out, x, panels), onednn, tiles


def calibrate(shape: MatmulShape, remeasure: bool = False) -> LinearCalibration:
    """This CPU's calibration for ``shape`` at the current thread count: from the cache unless
    ``remeasure``, else measured now and stored."""
    return _routes.calibrate(shape.route_key,
                             lambda threads: cache_key(shape, threads), lambda data: _parse(data, shape),
                             lambda: measure(shape), lambda cal: cal.route, remeasure)


def prepare(shapes: Iterable[MatmulShape]) -> None:
    """Calibrate every distinct shape (cached ones are read, not measured) so that ``onednn_from``
    knows them; first ask for the AMX tile state (``kernels.amx``: one log line where the CPU lists it),
    so that oneDNN's bfloat16 matmuls are timed with the units this process will serve with."""
    amx_state()
    for shape in dict.fromkeys(shapes):
        calibrate(shape)


def route_of(out_features: int, in_features: int, dtype: torch.dtype = torch.float32,
             gated: bool = False, logits: bool = False) -> LinearRoute:
    """This shape's route (with its SiLU where ``gated``; an LM head's where ``logits``) by row count:
    the panels at every row count if unprepared."""
    return _routes.get((out_features, in_features, dtype, gated, logits), LinearRoute())


def onednn_from(out_features: int, in_features: int, dtype: torch.dtype = torch.float32, gated: bool = False,
                logits: bool = False) -> int:
    """The row count from which this shape's matmul (with its SiLU where ``gated``; an LM head's where
    ``logits``) goes to oneDNN (``NEVER`` if unprepared)."""
    return route_of(out_features, in_features, dtype, gated, logits).onednn_from


def linear_form(weight: torch.Tensor, rows: int, gated: bool = False, logits: bool = False) -> LinearForm:
    """The kernel a float32 step of ``rows`` rows multiplies by ``weight`` (with its SiLU where ``gated``;
    as an LM head where ``logits``) on this CPU: its measured route; the panels for a weight that is not
    contiguous (oneDNN and the tiles read it or its panels as a plain matrix) or whose shape nobody
    prepared."""
    if not weight.is_contiguous():
        return LinearForm.PANELS
    return route_of(*weight.shape, weight.dtype, gated, logits).at(rows)


def takes_onednn(weight: torch.Tensor, gated: bool = False, logits: bool = False) -> bool:
    """Whether a step of some row count multiplies by ``weight`` (with its SiLU where ``gated``) through
    oneDNN on this CPU: its shape was prepared and oneDNN measured fastest from some row count below
    the tiles' (the weights a model keeps an :func:`onednn_weight` copy of)."""
    if weight.dtype not in WEIGHT_DTYPES.values():
        return False
    route = route_of(*weight.shape, weight.dtype, gated, logits)
    return route.onednn_from < min(route.tiles_from, NEVER)
