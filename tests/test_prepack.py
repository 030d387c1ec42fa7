"""oneDNN-packed weights: the same products as ``F.linear`` at every row count, and the memory switch."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from kernels import load_cpu_ops, prepack
from kernels.cpu_ops import SMALL_LINEAR_MAX_ROWS, linear

pytestmark = pytest.mark.core

needs_onednn = pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="no oneDNN in this torch")


@needs_onednn
@pytest.mark.parametrize("rows", [1, SMALL_LINEAR_MAX_ROWS + 1, 64, 300])
def test_packed_linear_matches_torch(rows: int) -> None:
    """Above the small-row kernel's range the packed weight serves the product (bias too); below it
    the plain weight does; either way the result is ``F.linear``'s."""
    gen = torch.Generator().manual_seed(rows)
    x, w, b = torch.randn(rows, 96, generator=gen), torch.randn(200, 96, generator=gen), torch.randn(200, generator=gen)
    packed = prepack.pack_weight(w)
    assert packed is not None
    cpp = load_cpu_ops()
    torch.testing.assert_close(linear(x, w, None, cpp, packed), F.linear(x, w), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(linear(x, w, b, cpp, packed), F.linear(x, w, b), rtol=1e-4, atol=1e-4)


def test_pack_weight_refuses_what_it_cannot_pack() -> None:
    assert prepack.pack_weight(torch.randn(4, 8, dtype=torch.bfloat16)) is None
    assert prepack.pack_weight(torch.randn(8)) is None


def test_prepack_switch_and_memory_share(monkeypatch: pytest.MonkeyPatch) -> None:
    """``=1`` always packs, ``=0`` never; unset, only copies within a quarter of available memory."""
    monkeypatch.setenv(prepack.ENV_SWITCH, "1")
    assert prepack.prepack_allowed(1 << 60)
    monkeypatch.setenv(prepack.ENV_SWITCH, "0")
    assert not prepack.prepack_allowed(1)
    monkeypatch.delenv(prepack.ENV_SWITCH)
    monkeypatch.setattr(prepack, "_available_memory_bytes", lambda: 4000)
    assert prepack.prepack_allowed(1000) and not prepack.prepack_allowed(1001)
    monkeypatch.setattr(prepack, "_available_memory_bytes", lambda: None)
    assert not prepack.prepack_allowed(1)
