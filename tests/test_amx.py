"""AMX: listed by the CPU and granted by the OS, asked without running a tile instruction."""

from __future__ import annotations

import pytest

from kernels import amx
from kernels.amx import AmxState, state_for

pytestmark = pytest.mark.core


def test_a_cpu_without_the_tile_units_asks_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(amx, "request_tile_state", lambda: pytest.fail("asked the OS for tiles the CPU lacks"))
    state = state_for(frozenset({"avx512f", "avx512_bf16", "amx_bf16"}))  # no amx_tile: nothing to grant
    assert state == AmxState(("amx_bf16",), False, "not listed by the CPU") and not state.usable


@pytest.mark.parametrize(("granted", "why"), [(True, "granted by the OS"),
                                              (False, "the OS refused the tile state (arch_prctl: EPERM)")])
def test_listed_units_are_used_only_where_the_os_grants_them(monkeypatch: pytest.MonkeyPatch, granted: bool,
                                                            why: str) -> None:
    monkeypatch.setattr(amx, "request_tile_state", lambda: (granted, why))
    state = state_for(frozenset({"amx_tile", "amx_bf16", "amx_int8", "avx512f"}))
    assert state.listed == ("amx_tile", "amx_bf16", "amx_int8")
    assert state.granted is granted and state.usable is granted and state.why == why


def test_this_machine_gets_an_answer_without_a_fault() -> None:
    """The real question on this machine, asked even where the CPU lists no AMX: an answer with its
    reason, never a fault; the benchmark line names it."""
    state = amx.amx_state()
    granted, why = amx.request_tile_state()
    assert isinstance(granted, bool) and why
    if state.set_aside:  # a forced variant below AVX512_BF16 (AGENT_ENGINE_ISA)
        assert not state.usable and amx.describe().endswith("set aside")
    elif "amx_tile" in state.listed:
        assert state.granted is granted and amx.describe().endswith("granted" if granted else "refused")
    else:
        assert not state.granted and not granted and amx.describe() == "AMX: none"


def test_onednn_multiplies_in_tiles_exactly_where_the_probe_says_they_are_granted() -> None:
    """The bfloat16 routes reach AMX through oneDNN: its own report of the kernel it ran (``ONEDNN_VERBOSE``,
    in a child process) names AMX where our probe found the tiles granted, and not elsewhere."""
    import os
    import subprocess
    import sys

    from kernels.amx import native_bf16

    if not native_bf16():
        pytest.skip("no native bfloat16 here (needs AVX512_BF16 or AMX): oneDNN's bfloat16 route is not used")
    code = ("import torch\n"
            "a, w = torch.randn(64, 256).bfloat16(), torch.randn(512, 256).bfloat16()\n"
            "torch.ops.mkldnn._linear_pointwise(a, w, None, 'none', [], '')\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "ONEDNN_VERBOSE": "1"})
    assert run.returncode == 0, run.stderr[-2000:]
    executed = [line.split(",")[6] for line in run.stdout.splitlines() if ",exec,cpu," in line]
    assert executed, run.stdout[-2000:]  # oneDNN ran the matmul and said with what
    assert any("amx" in impl for impl in executed) is amx.amx_state().usable, executed


@pytest.mark.core
def test_our_tile_kernels_are_a_route_only_where_usable_built_and_not_switched_off(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import kernels.cpp_build as cpp_build

    monkeypatch.setattr(amx, "amx_state", lambda: AmxState(("amx_tile", "amx_bf16"), True, "granted"))
    monkeypatch.setattr(cpp_build, "tile_kernels", lambda: True)
    monkeypatch.delenv(amx.TILES_SWITCH, raising=False)
    assert amx.tiles_ready()
    monkeypatch.setenv(amx.TILES_SWITCH, "0")
    assert not amx.tiles_ready()
    monkeypatch.setenv(amx.TILES_SWITCH, "1")
    monkeypatch.setattr(cpp_build, "tile_kernels", lambda: False)
    assert not amx.tiles_ready()
