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
  the choice changes speed and that one rounding only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

import torch

from kernels.amx import amx_state, native_bf16
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
VERSION = 2  # bump when the measurement changes
PREPACK_ROWS = 256  # the row count oneDNN lays an :func:`onednn_weight` out for (any count multiplies by it)
ONEDNN = torch.backends.mkldnn.is_available()
WEIGHT_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}  # the weights with both routes


@dataclass(frozen=True)
class MatmulShape:
    """A weight ``[out_features, in_features]`` of ``dtype`` (a name in ``WEIGHT_DTYPES``); ``gated``: a
    fused ``[gate; up]`` weight multiplied with its SiLU (``kernels.cpu_ops.gate_up_silu``; its
    intermediate size, half of ``out_features``, a multiple of the panel width)."""

    out_features: int
    in_features: int
    dtype: str = "float32"
    gated: bool = False

    def __post_init__(self) -> None:
        if self.dtype not in WEIGHT_DTYPES:
            raise ValueError(f"a matmul route is measured for {sorted(WEIGHT_DTYPES)} weights, not {self.dtype!r}")
        if self.gated and self.out_features % (2 * PANEL):
            raise ValueError(f"a gated gate/up weight has an intermediate size that is a multiple of {PANEL}: "
                             f"{self.out_features} outputs")

    @classmethod
    def of(cls, weight: torch.Tensor, gated: bool = False) -> MatmulShape:
        """The shape of a float32 or bfloat16 ``[N, K]`` weight (``ValueError`` for another dtype)."""
        return cls(weight.shape[0], weight.shape[1], str(weight.dtype).removeprefix("torch."), gated)

    @property
    def route_key(self) -> tuple[int, int, torch.dtype, bool]:
        """What :func:`onednn_from` looks the route up by."""
        return self.out_features, self.in_features, WEIGHT_DTYPES[self.dtype], self.gated


@dataclass(frozen=True)
class LinearCalibration:
    """One measurement: oneDNN from this many rows on, and the ms per row count behind it."""

    onednn_from: int
    ms: dict[str, tuple[float, float]]  # rows -> (panels ms, oneDNN ms)
    key: str
    measured_at: str


def cache_key(shape: MatmulShape, threads: int) -> str:
    """The store key of ``shape``'s calibration (a float32 shape's is what it was before weights had a
    dtype, and a shape that is not gated what it was before gated ones: their stored calibrations stay
    valid)."""
    fields = asdict(shape)
    if shape.dtype == "float32":
        del fields["dtype"]
    if not shape.gated:
        del fields["gated"]
    return store_key("linear", VERSION, fields, threads)


def onednn_has(dtype: str) -> bool:
    """Whether oneDNN's matmul is a route for ``dtype`` weights here: oneDNN is in this torch, and for
    bfloat16 the CPU multiplies bfloat16 natively (AVX512_BF16, or AMX tiles granted; elsewhere
    oneDNN emulates it slowly or refuses it)."""
    return ONEDNN and (dtype == "float32" or native_bf16())


def ladder(shape: MatmulShape) -> tuple[int, ...]:
    """The row counts timed for ``shape``: ``ROWS`` up to the ``FLOP_BUDGET``, at least the first."""
    flops_per_row = 2 * shape.out_features * shape.in_features
    return tuple(r for i, r in enumerate(ROWS) if i == 0 or r * flops_per_row <= FLOP_BUDGET)


def measure(shape: MatmulShape) -> LinearCalibration:
    """Both routes over ``ladder(shape)`` on this CPU, now (a gated shape with its SiLU on each)."""
    gen = torch.Generator().manual_seed(shape.out_features * 7919 + shape.in_features)
    weight = torch.randn(shape.out_features, shape.in_features, generator=gen).to(WEIGHT_DTYPES[shape.dtype])
    by_panels, by_onednn = _routes_of(shape, weight)
    rows, seconds = ladder(shape), []
    for n in rows:
        x = torch.randn(n, shape.in_features, generator=gen)
        out = x.new_empty(n, shape.out_features // 2 if shape.gated else shape.out_features)
        panels_call = lambda x=x, out=out: by_panels(x, out)  # noqa: E731
        if onednn_has(shape.dtype):
            panels, onednn = best_seconds_each([panels_call, lambda x=x, out=out: by_onednn(x, out)], REPEATS)
        else:
            panels, onednn = best_seconds_each([panels_call], REPEATS)[0], float("inf")
        seconds.append((panels, onednn))
    first = crossover_size(rows, [p for p, _ in seconds], [o for _, o in seconds], MARGIN)
    return LinearCalibration(first, {str(n): (p * 1e3, o * 1e3) for n, (p, o) in zip(rows, seconds, strict=True)},
                             cache_key(shape, torch.get_num_threads()), time.strftime("%Y-%m-%dT%H:%M:%S"))


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
    infinite only where oneDNN is no route for its dtype here, ``onednn_has``)."""
    ms = checked_ms(data["ms"], (2,), () if onednn_has(shape.dtype) else (1,))
    return LinearCalibration(checked_threshold(data["onednn_from"], ms), ms,
                             data["key"], data["measured_at"])


# (out, in, dtype, gated) -> oneDNN from this many rows: keyed by the weight's shape, looked up on every matmul
_routes: RouteTable[tuple[int, int, torch.dtype, bool], int] = RouteTable("where a matmul leaves the panels for oneDNN")


def _routes_of(shape: MatmulShape, weight: torch.Tensor) -> tuple[Callable[[torch.Tensor, torch.Tensor], object],
                                                                   Callable[[torch.Tensor, torch.Tensor], object]]:
    """The panel route and the oneDNN route of ``shape`` on ``weight``, each ``(x, out) -> None``
    writing what the matmul's caller gets (for a gated shape, the activation) into ``out``."""
    from kernels.cpp_build import ops
    from kernels.prepack import pack_gate_up, pack_weight

    blocked = onednn_weight(weight) if onednn_has(shape.dtype) else None  # timed only where oneDNN is a route
    if shape.gated:
        interleaved = pack_gate_up(weight, shape.out_features // 2)
        return (lambda x, out: ops().panel_linear_silu(out, x, interleaved),
                lambda x, out: ops().silu_and_mul(out, onednn_linear(x, weight, prepacked=blocked)))
    packed = pack_weight(weight)
    return (lambda x, out: ops().panel_linear(out, x, packed),
            lambda x, out: onednn_linear(x, weight, prepacked=blocked))


def calibrate(shape: MatmulShape, remeasure: bool = False) -> LinearCalibration:
    """This CPU's calibration for ``shape`` at the current thread count: from the cache unless
    ``remeasure``, else measured now and stored."""
    return _routes.calibrate(shape.route_key,
                             lambda threads: cache_key(shape, threads), lambda data: _parse(data, shape),
                             lambda: measure(shape), lambda cal: cal.onednn_from, remeasure)


def prepare(shapes: Iterable[MatmulShape]) -> None:
    """Calibrate every distinct shape (cached ones are read, not measured) so that ``onednn_from``
    knows them; first ask for the AMX tile state (``kernels.amx``: one log line where the CPU lists it),
    so that oneDNN's bfloat16 matmuls are timed with the units this process will serve with."""
    amx_state()
    for shape in dict.fromkeys(shapes):
        calibrate(shape)


def onednn_from(out_features: int, in_features: int, dtype: torch.dtype = torch.float32, gated: bool = False) -> int:
    """The row count from which this shape's matmul (with its SiLU where ``gated``) goes to oneDNN
    (``NEVER`` if unprepared)."""
    return _routes.get((out_features, in_features, dtype, gated), NEVER)


def takes_onednn(weight: torch.Tensor, gated: bool = False) -> bool:
    """Whether a step of some row count multiplies by ``weight`` (with its SiLU where ``gated``) through
    oneDNN on this CPU: its shape was prepared and oneDNN measured faster from some row count (the
    weights a model keeps an :func:`onednn_weight` copy of)."""
    return weight.dtype in WEIGHT_DTYPES.values() and onednn_from(*weight.shape, weight.dtype, gated) < NEVER
