"""Tensors placed in a transparent-huge-page arena (``kernels.huge_pages``): same values, 4 KiB-aligned
views that keep the arena alive, a full arena refused with a ValueError."""

from __future__ import annotations

import gc

import pytest
import torch

from kernels.huge_pages import ALIGN, HUGE_PAGE, HugePageArena, huge_pages_available

pytestmark = pytest.mark.core


def test_placed_tensors_keep_their_values_and_start_on_pages() -> None:
    tensors = [torch.arange(5000, dtype=torch.uint8).view(50, 100), torch.randn(3, 7), torch.arange(9, dtype=torch.int64)]
    arena = HugePageArena(sum(HugePageArena.room(t.numel() * t.element_size()) for t in tensors))
    placed = [arena.place(t) for t in tensors]
    base = placed[0].data_ptr()
    assert base % HUGE_PAGE == 0
    for src, dst in zip(tensors, placed, strict=True):
        assert dst.dtype == src.dtype and dst.shape == src.shape and dst.is_contiguous()
        assert torch.equal(dst, src) and dst.data_ptr() != src.data_ptr()
        assert (dst.data_ptr() - base) % ALIGN == 0
    with pytest.raises(ValueError, match="holds"):
        arena.place(torch.zeros(arena.capacity - arena.used + 1, dtype=torch.uint8))


def test_a_view_outlives_its_arena() -> None:
    arena = HugePageArena(1 << 20)
    view = arena.place(torch.full((1000,), 7.0))
    del arena
    gc.collect()
    assert float(view.sum()) == 7000.0


@pytest.mark.skipif(not huge_pages_available(), reason="this system offers no transparent huge pages")
def test_the_arena_asks_for_huge_pages() -> None:
    assert HugePageArena(HUGE_PAGE).advised
