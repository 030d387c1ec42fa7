"""A lean decoder's working copies (``agent_engine.model.decoder_weights``): panels when memory
allows, and oneDNN's layout exactly for the weights whose measured route takes oneDNN, which the
matmuls then multiply by."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from agent_engine.model.decoder_weights import GATE_UP_SILU, LayerWeights, make_working_copies, routed_shapes
from kernels import cpp_build, linear_routes, load_cpu_ops
from kernels.calibration_store import NEVER
from kernels.cpu_ops import gate_up_silu, linear
from kernels.linear_routes import LinearRoute, MatmulShape, onednn_linear, onednn_weight

HIDDEN, INTER, QKV = 64, 32, 96
needs_cpp = pytest.mark.skipif(not load_cpu_ops(), reason=f"C++ kernels unavailable: {cpp_build.load_error()}")


def _layer(gen: torch.Generator, dtype: torch.dtype = torch.float32) -> LayerWeights:
    def w(n: int, k: int) -> torch.Tensor:
        return torch.randn(n, k, generator=gen).to(dtype)

    return LayerWeights(torch.ones(HIDDEN), torch.ones(HIDDEN), w(QKV, HIDDEN), None, w(HIDDEN, HIDDEN),
                        w(2 * INTER, HIDDEN), w(HIDDEN, INTER), 1e-6, 1e-6)


@pytest.fixture
def routes(monkeypatch: pytest.MonkeyPatch) -> dict[MatmulShape, int]:
    """A route table that ``linear_routes.prepare`` fills with what the test sets (nothing is timed)."""
    table: dict[MatmulShape, int] = {}
    monkeypatch.setattr(linear_routes._routes, "known", {})

    def prepare(shapes: list[MatmulShape]) -> None:
        for shape in shapes:
            linear_routes._routes.known[(shape.route_key, torch.get_num_threads())] = LinearRoute(table.get(shape, NEVER))

    monkeypatch.setattr(linear_routes, "prepare", prepare)
    monkeypatch.setenv("AGENT_ENGINE_PREPACK", "1")
    return table


@pytest.mark.core
def test_only_weights_routed_to_onednn_get_its_layout(routes: dict[MatmulShape, int]) -> None:
    """The O projection and the (gated) gate/up weight take oneDNN from some row count: they, and the
    float32 head that does too, get oneDNN copies; QKV and down, on the panels at every width, do not."""
    gen = torch.Generator().manual_seed(0)
    layers = [_layer(gen), _layer(gen)]
    head = torch.randn(200, HIDDEN, generator=gen)
    routes[MatmulShape(HIDDEN, HIDDEN)] = 64
    routes[MatmulShape(2 * INTER, HIDDEN, gated=True)] = 128
    routes[MatmulShape(200, HIDDEN, logits=True)] = 256
    copies = make_working_copies(layers, head, INTER, torch.float32)
    for layer in layers:
        assert set(layer.packed) == {"qkv_w", "o_w", GATE_UP_SILU, "down_w"}
        assert set(layer.blocked) == {"o_w", "gate_up_w"} and all(b.is_mkldnn for b in layer.blocked.values())
    assert copies.packed is not None and copies.blocked is not None and copies.blocked.is_mkldnn
    assert MatmulShape(2 * INTER, HIDDEN, gated=True) in routed_shapes(layers, head)


@pytest.mark.core
def test_a_bfloat16_head_has_no_onednn_route_and_a_refused_prepack_makes_no_copies(
        routes: dict[MatmulShape, int], monkeypatch: pytest.MonkeyPatch) -> None:
    """The LM head is routed as one (``logits``): in bfloat16 it keeps float32 sums, so oneDNN (which
    rounds its product) is no route for it, the panels and the AMX tiles are."""
    gen = torch.Generator().manual_seed(1)
    bf16_head = torch.randn(200, HIDDEN, generator=gen).bfloat16()
    head_shape = MatmulShape(200, HIDDEN, "bfloat16", logits=True)
    assert routed_shapes([], bf16_head) == [head_shape]
    assert not head_shape.onednn_route and MatmulShape(200, HIDDEN, "float32", logits=True).onednn_route == \
        linear_routes.onednn_has("float32")
    monkeypatch.setenv("AGENT_ENGINE_PREPACK", "0")
    layers = [_layer(gen)]
    routes[MatmulShape(HIDDEN, HIDDEN)] = 1
    copies = make_working_copies(layers, torch.randn(200, HIDDEN, generator=gen), INTER, torch.float32)
    assert copies.packed is None and copies.blocked is None and not layers[0].packed and not layers[0].blocked


@needs_cpp
@pytest.mark.core
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_onednn_layout_gives_the_plain_weights_product(dtype: str) -> None:
    """oneDNN on its own layout multiplies as on the plain weight (float32 summation order aside) at
    every width, and ``linear`` / ``gate_up_silu`` multiply by it from their oneDNN row count."""
    if not linear_routes.onednn_has(dtype):
        pytest.skip(f"oneDNN's matmul is no route for {dtype} weights on this CPU")
    gen = torch.Generator().manual_seed(2)
    weight = torch.randn(2 * INTER, HIDDEN, generator=gen).to(linear_routes.WEIGHT_DTYPES[dtype])
    blocked = onednn_weight(weight)
    for rows in (1, 7, 64, 300):
        x = torch.randn(rows, HIDDEN, generator=gen)
        torch.testing.assert_close(onednn_linear(x, weight, None, blocked), onednn_linear(x, weight),
                                   rtol=1e-5, atol=1e-5)
    from kernels.prepack import pack_gate_up, pack_weight

    x = torch.randn(300, HIDDEN, generator=gen)
    key = (MatmulShape.of(weight).route_key, torch.get_num_threads())
    gated_key = (MatmulShape.of(weight, gated=True).route_key, torch.get_num_threads())
    linear_routes._routes.known[key] = linear_routes._routes.known[gated_key] = LinearRoute(64)
    try:
        routed = linear(x, weight, None, True, pack_weight(weight), None, blocked)
        torch.testing.assert_close(routed, onednn_linear(x, weight), rtol=1e-5, atol=1e-5)
        interleaved = pack_gate_up(weight, INTER)
        assert interleaved is not None
        product = onednn_linear(x, weight)
        expected = F.silu(product[:, :INTER]) * product[:, INTER:]
        torch.testing.assert_close(gate_up_silu(x, weight, interleaved, blocked=blocked), expected,
                                   rtol=1e-5, atol=1e-5)
    finally:
        del linear_routes._routes.known[key], linear_routes._routes.known[gated_key]


@pytest.mark.core
def test_the_onednn_layout_refuses_what_is_not_a_float_matrix() -> None:
    with pytest.raises(ValueError, match="float32 or bfloat16 CPU matrix"):
        onednn_weight(torch.ones(2, 3, 4))
    with pytest.raises(ValueError, match="float32 or bfloat16 CPU matrix"):
        onednn_weight(torch.ones(4, 4, dtype=torch.int8))


@pytest.mark.core
def test_no_onednn_copy_for_a_route_past_the_widest_step_or_past_the_memory(
        routes: dict[MatmulShape, int], monkeypatch: pytest.MonkeyPatch) -> None:
    """O takes oneDNN from 64 rows, gate/up from 2,048: with steps of at most 256 rows only O gets a
    copy; where memory refuses the copies (asked after the panels) none is made and the panels stay."""
    import agent_engine.model.decoder_weights as decoder_weights

    gen = torch.Generator().manual_seed(4)
    routes[MatmulShape(HIDDEN, HIDDEN)] = 64
    routes[MatmulShape(2 * INTER, HIDDEN, gated=True)] = 2048
    layers = [_layer(gen)]
    make_working_copies(layers, None, INTER, torch.float32, max_rows=256)
    assert set(layers[0].blocked) == {"o_w"}
    asked: list[str] = []

    def allowed(total_bytes: int, what: str = "in panels") -> bool:
        asked.append(what)
        return what == "in panels"

    monkeypatch.setattr(decoder_weights, "prepack_allowed", allowed)
    layers = [_layer(gen)]
    make_working_copies(layers, None, INTER, torch.float32)
    assert asked == ["in panels", "in oneDNN's layout"] and layers[0].packed and not layers[0].blocked
