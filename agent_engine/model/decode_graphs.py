"""Decode steps replayed from CUDA graphs, one per (rows, width) bucket.

On a GPU a decode step of a small model is bound by the host: the Python of every module and the
launch of every kernel take longer than the GPU's work. A captured graph replays the whole forward
(embedding, layers, paged attention, LM head) as one launch. Shapes are fixed per graph, so a step of
``n`` decode rows whose longest table needs ``b`` blocks runs in the graph of the smallest bucket
``rows >= n`` (``ROW_BUCKETS``, up to ``max_rows``) and ``width >= b`` (powers of two from
``MIN_WIDTH``, up to ``max_width``), its extra rows padded (``kernels.static_decode``).

Invariants:

* a graph is captured the first time its bucket is used, from the step at hand (or ahead, by
  ``warm_up``, on a step of padding alone): one eager warm-up run on a side stream (it computes that
  step; writing the same K/V twice is harmless), then the capture, then one replay whose logits must
  match the warm-up's before the graph is kept. All graphs share one memory pool and never run
  concurrently;
* a bucket whose capture fails (out of memory, an op that cannot be captured) is remembered and its
  steps go back to the caller's eager path (``accepts`` says no), with one warning;
* memory: the graphs' intermediate tensors live in the one pool (sized by the largest graph, since
  no graph's tensors outlive its replay), and the graphs of one row count write their logits into one
  buffer of that many rows, allocated outside the pool;
* ``run`` returns float32 logits ``[n, V]``: a view of that buffer, valid until the next ``run`` (the
  caller samples from it at once);
* with ``capture=False`` (any device) the same fixed-shape step runs eagerly: the path the graphs
  record, testable where there is no GPU.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import torch

from kernels.static_decode import StaticDecodeBatch

logger = logging.getLogger(__name__)

ROW_BUCKETS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)
MIN_WIDTH = 8  # blocks: the narrowest table a graph holds

StepFn = Callable[[StaticDecodeBatch], torch.Tensor]


@dataclass
class _Entry:
    batch: StaticDecodeBatch
    graph: torch.cuda.CUDAGraph | None = None
    logits: torch.Tensor | None = None


def _bucket(n: int, buckets: tuple[int, ...]) -> int | None:
    return next((b for b in buckets if b >= n), None)


def _check_replay(replayed: torch.Tensor, eager: torch.Tensor) -> None:
    """``RuntimeError`` unless a graph's first replay gave the eager run's logits of the same step (up to
    the rounding of kernels chosen differently under capture): a graph that recorded something else
    (an op that read a host value, a buffer that moved) is never used."""
    scale = float(eager.abs().max()) if eager.numel() else 0.0
    if replayed.shape != eager.shape or not torch.allclose(replayed, eager, rtol=2e-2, atol=2e-2 * max(scale, 1.0)):
        raise RuntimeError("the graph's replay differs from the eager run of the same step")


class DecodeGraphs:
    """The decode graphs of one model runner (module docstring). ``step`` computes a static batch's
    float32 logits ``[rows, V]`` from its buffers alone (no host sync, no shape from the values)."""

    def __init__(self, step: StepFn, max_rows: int, max_width: int, block_size: int, device: torch.device,
                 capture: bool = True) -> None:
        if capture and device.type != "cuda":
            raise ValueError(f"CUDA graphs need a CUDA device, not {device}")
        self.step, self.block_size, self.device, self.capture = step, block_size, device, capture
        self.row_buckets = tuple(b for b in ROW_BUCKETS if b <= max_rows) or (max_rows,)
        widths, w = [], MIN_WIDTH
        while w < max_width:
            widths.append(w)
            w *= 2
        self.width_buckets = (*widths, max_width)
        self._entries: dict[tuple[int, int], _Entry] = {}
        self._logits: dict[int, torch.Tensor] = {}  # the output of every graph of a row count
        self._failed: set[tuple[int, int]] = set()
        self._pool = torch.cuda.graph_pool_handle() if capture else None
        self.steps = 0  # decode steps served (replayed, or run eagerly with capture=False)

    def _key(self, num_rows: int, max_blocks: int) -> tuple[int, int] | None:
        rows, width = _bucket(num_rows, self.row_buckets), _bucket(max_blocks, self.width_buckets)
        if rows is None or width is None:
            return None
        return rows, width

    def accepts(self, num_rows: int, max_blocks: int) -> bool:
        """Whether a decode step of ``num_rows`` rows whose longest needs ``max_blocks`` blocks runs here."""
        key = self._key(num_rows, max_blocks)
        return key is not None and key not in self._failed

    def run(self, token_ids: list[int], context_lens: list[int], block_tables: list[list[int]]) -> torch.Tensor:
        """One decode step (``token_ids[i]`` at position ``context_lens[i]`` over ``block_tables[i]``):
        float32 logits ``[len(token_ids), V]``. Call only where :meth:`accepts`; ``RuntimeError`` if the
        bucket's capture fails now (the step has not run: run it eagerly)."""
        max_blocks = max(-(-(c + 1) // self.block_size) for c in context_lens)
        key = self._key(len(token_ids), max_blocks)
        if key is None or key in self._failed:
            raise ValueError(f"no decode graph for {len(token_ids)} rows over {max_blocks} blocks")
        entry = self._entry(key)
        entry.batch.fill(token_ids, context_lens, block_tables)
        self.steps += 1
        if not self.capture:
            return self.step(entry.batch)[: len(token_ids)]
        if entry.graph is None:
            self._capture(key, entry)  # replays once, checked against the eager run of this step
        else:
            entry.graph.replay()
        assert entry.logits is not None
        return entry.logits[: len(token_ids)]

    def warm_up(self, max_rows: int, max_blocks: int) -> int:
        """Capture now, on steps of padding alone (they write only the null block), every bucket that
        steps of up to ``max_rows`` rows over up to ``max_blocks`` blocks use; returns how many graphs
        were captured. Buckets that fail stay eager, as in :meth:`run`."""
        captured = 0
        for rows in self.row_buckets:
            for width in self.width_buckets:
                key = (rows, width)
                if key in self._failed or (key in self._entries and self._entries[key].graph is not None):
                    continue
                entry = self._entry(key)
                entry.batch.fill([], [], [])
                try:
                    self._capture(key, entry)
                    captured += 1
                except RuntimeError:
                    pass
                if width >= max_blocks:
                    break
            if rows >= max_rows:
                break
        return captured

    def _entry(self, key: tuple[int, int]) -> _Entry:
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry(StaticDecodeBatch(key[0], key[1], self.block_size, self.device))
        return entry

    def _capture(self, key: tuple[int, int], entry: _Entry) -> None:
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.stream(side):
                expected = self.step(entry.batch)  # warm-up: lazy initialisations happen outside the capture
            torch.cuda.current_stream(self.device).wait_stream(side)
            logits = self._logits.get(key[0])
            if logits is None or logits.shape != expected.shape:
                logits = self._logits[key[0]] = torch.empty_like(expected)
            # thread_local: CUDA calls other threads make meanwhile (a server's) do not break the capture
            with torch.cuda.graph(graph, pool=self._pool, capture_error_mode="thread_local"):
                logits.copy_(self.step(entry.batch))  # the step's own tensors are the pool's, for any graph
            graph.replay()
            _check_replay(logits, expected)
        except Exception as exc:  # noqa: BLE001 - this bucket runs eagerly from now on
            self._failed.add(key)
            del self._entries[key]
            logger.warning("decode graph for %d rows x %d blocks not captured (%s: %s); those steps run eagerly",
                           key[0], key[1], type(exc).__name__, exc)
            raise RuntimeError(f"decode graph capture failed: {exc}") from exc
        entry.graph, entry.logits = graph, logits
        logger.info("captured the decode graph for %d rows x %d blocks", *key)
