"""Read-mostly tensors placed in transparent huge pages (Linux).

A decode step at one stream reads every weight byte once, as one long stream per matmul. In 4 KiB
pages that stream crosses a page, and often misses the TLB, every 4 KiB; in 2 MiB pages it does so
512 times less often. Measured with ``agent-engine bench stack --pages`` (docs/performance.md): the
one-stream decode of the Qwen2.5-Coder 0.5B and 1.5B Q4_K_M files was 8-9% faster with their blocks
in huge pages than on the memory-mapped file, whose page cache this kernel maps in 4 KiB pages (``MADV_COLLAPSE``
refuses a file mapping there), on an AMD EPYC (Zen 5, AVX-512).

:class:`HugePageArena` is one anonymous mapping, 2 MiB aligned and advised ``MADV_HUGEPAGE``, that
tensors are copied into (:meth:`HugePageArena.place`).

Invariants:
- :func:`huge_pages_available` is True only on Linux with transparent huge pages ``always`` or
  ``madvise``; elsewhere callers keep their tensors where they are (nothing else changes).
- A placed tensor is a contiguous view of the arena with the source's dtype, shape and values, at a
  4 KiB-aligned offset; the arena's memory lives as long as any view of it (each view holds the
  mapping through its storage), and is released with the last one.
- The arena is sized once; placing more than it holds is a ``ValueError``.
"""

from __future__ import annotations

import ctypes
import mmap
import sys
from pathlib import Path

import numpy as np
import torch

HUGE_PAGE = 2 << 20
ALIGN = 4096  # each tensor starts on a page: aligned vector loads
MADV_HUGEPAGE = 14
_THP_ENABLED = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def huge_pages_available() -> bool:
    """True where this process can have anonymous memory in transparent huge pages on request."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mode = _THP_ENABLED.read_text()
    except OSError:
        return False
    return "[always]" in mode or "[madvise]" in mode


def _aligned(n: int, to: int) -> int:
    return -(-n // to) * to


class HugePageArena:
    """Room for ``nbytes`` of tensors (each rounded up to 4 KiB) in huge pages; see the module."""

    def __init__(self, nbytes: int) -> None:
        if nbytes < 0:
            raise ValueError(f"an arena of {nbytes} bytes")
        size = _aligned(max(nbytes, 1), HUGE_PAGE) + HUGE_PAGE  # slack to start on a 2 MiB boundary
        self._map = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        raw = np.frombuffer(self._map, dtype=np.uint8)
        start = (-raw.ctypes.data) % HUGE_PAGE
        self._bytes = torch.from_numpy(raw[start : start + size - HUGE_PAGE])
        self.advised = self._advise(raw.ctypes.data + start, size - HUGE_PAGE)
        self.used = 0

    @staticmethod
    def _advise(address: int, length: int) -> bool:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        return libc.madvise(address, length, MADV_HUGEPAGE) == 0

    @property
    def capacity(self) -> int:
        return int(self._bytes.numel())

    def place(self, tensor: torch.Tensor) -> torch.Tensor:
        """A copy of ``tensor`` (any dtype, CPU) in the arena: a contiguous view of its memory."""
        nbytes = tensor.numel() * tensor.element_size()
        if self.used + nbytes > self.capacity:
            raise ValueError(f"the arena holds {self.capacity} bytes; {self.used} used, {nbytes} more asked")
        view = self._bytes[self.used : self.used + nbytes].view(tensor.dtype).view(tensor.shape)
        view.copy_(tensor)
        self.used = _aligned(self.used + nbytes, ALIGN)
        return view

    @staticmethod
    def room(nbytes: int) -> int:
        """The arena bytes one tensor of ``nbytes`` takes (rounded up to 4 KiB)."""
        return _aligned(nbytes, ALIGN)
