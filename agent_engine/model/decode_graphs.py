"""Decode steps replayed from CUDA graphs, one per (rows, width) bucket.

On a GPU a decode step of a small model is bound by the host: the Python of every module and the
launch of every kernel take longer than the GPU's work. A captured graph replays the whole forward
(embedding, layers, paged attention, LM head) as one launch. Shapes are fixed per graph, so a step of
``n`` decode rows whose longest table needs ``b`` blocks runs in the graph of the smallest bucket
``rows >= n`` (``ROW_BUCKETS``, up to ``max_rows``) and ``width >= b`` (powers of two from
``MIN_WIDTH``, up to ``max_width``), its extra rows padded (``kernels.static_decode``).

Invariants:

* a graph is captured the first time its bucket is used (or ahead, by ``warm_up``), always on a step
  of padding alone: an eager warm-up run on a side stream, then the capture; then a probe step (other
  tokens, positions and lengths, all inside the null block) runs eagerly and replayed, and the graph
  is kept only if the two agree. Capturing never writes a real request's blocks. All graphs share
  one memory pool and never run concurrently;
* a bucket whose warm-up or probe fails (out of memory, a wrong replay) is remembered and its steps go
  back to the caller's eager path (``accepts`` says no), with one warning; a capture that breaks
  turns every graph off (``disabled``), since it can leave the shared pool unusable;
* memory: the graphs' intermediate tensors live in the one pool (sized by the largest graph, since
  no graph's tensors outlive its replay), and every graph writes its logits into the first rows of one
  ``[max_rows, V]`` buffer allocated outside the pool;
* ``run`` returns float32 logits ``[n, V]``: a view of that buffer, valid until the next ``run`` (the
  caller samples from it at once);
* with ``capture=False`` (any device) the same fixed-shape step runs eagerly: the path the graphs
  record, testable where there is no GPU.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import NoReturn

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
    """``RuntimeError`` unless a graph's replay of a step gave the logits of that step run eagerly (up to
    the rounding of kernels chosen differently under capture)."""
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
        if max_rows < 1 or max_width < 1:
            raise ValueError(f"decode graphs need max_rows >= 1 and max_width >= 1, got {max_rows}, {max_width}")
        self.step, self.block_size, self.device, self.capture = step, block_size, device, capture
        self.row_buckets = (*(b for b in ROW_BUCKETS if b < max_rows), max_rows)
        widths, w = [], MIN_WIDTH
        while w < max_width:
            widths.append(w)
            w *= 2
        self.width_buckets = (*widths, max_width)
        self._entries: dict[tuple[int, int], _Entry] = {}
        self._logits: torch.Tensor | None = None  # [max_rows, V]: every graph writes its rows here
        self._failed: set[tuple[int, int]] = set()
        self.disabled: str | None = None  # why no graph runs any more (a capture broke), else None
        self._pool = torch.cuda.graph_pool_handle() if capture else None
        self.steps = 0  # decode steps served (replayed, or run eagerly with capture=False)

    @property
    def captured(self) -> int:
        """How many buckets have a graph."""
        return sum(entry.graph is not None for entry in self._entries.values())

    def _key(self, num_rows: int, max_blocks: int) -> tuple[int, int] | None:
        rows, width = _bucket(num_rows, self.row_buckets), _bucket(max_blocks, self.width_buckets)
        if rows is None or width is None:
            return None
        return rows, width

    def accepts(self, num_rows: int, max_blocks: int) -> bool:
        """Whether a decode step of ``num_rows`` rows whose longest needs ``max_blocks`` blocks runs here."""
        key = self._key(num_rows, max_blocks)
        return self.disabled is None and key is not None and key not in self._failed

    def run(self, token_ids: list[int], context_lens: list[int],
            block_tables: list[list[int]]) -> torch.Tensor | None:
        """One decode step (``token_ids[i]`` at position ``context_lens[i]`` over ``block_tables[i]``):
        float32 logits ``[len(token_ids), V]``, or None when no graph serves it (no bucket fits, or its
        capture failed, now or before): the step has not run, the caller runs it eagerly."""
        max_blocks = max(-(-(c + 1) // self.block_size) for c in context_lens)
        key = self._key(len(token_ids), max_blocks)
        if key is None or not self.accepts(*key):
            return None
        entry = self._entry(key)
        if self.capture and entry.graph is None:
            try:
                self._capture(key, entry)  # on padding and a probe step: nothing but the null block is written
            except RuntimeError:  # logged once; this bucket (or every one) runs eagerly from now on
                return None
        entry.batch.fill(token_ids, context_lens, block_tables)
        if self.capture:
            assert entry.graph is not None and entry.logits is not None
            entry.graph.replay()
            logits = entry.logits
        else:
            logits = self.step(entry.batch)
        self.steps += 1
        return logits[: len(token_ids)]

    def warm_up(self, max_rows: int, max_blocks: int) -> int:
        """Capture now every bucket that steps of up to ``max_rows`` rows over up to ``max_blocks`` blocks
        use (without capture: nothing); returns how many graphs were captured. Buckets that fail stay
        eager, as in :meth:`run`."""
        captured = 0
        for rows in self.row_buckets if self.capture else ():
            for width in self.width_buckets:
                key = (rows, width)
                if not self.accepts(rows, width):
                    break
                if self._entry(key).graph is None:
                    try:
                        self._capture(key, self._entries[key])
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
        """Record ``key``'s graph on a step of padding alone, then keep it only if its replay of a probe
        step (other tokens, positions and lengths, all in the null block) matches that step run eagerly:
        a graph that baked in a value of the capture step, or reads a buffer that moved, is never used.
        ``RuntimeError`` when it fails: the bucket runs eagerly from now on, or every bucket does when the
        capture itself broke (the shared pool may be left recording)."""
        current = torch.cuda.current_stream(self.device)
        batch, side = entry.batch, None
        try:
            side = torch.cuda.Stream(self.device)
            side.wait_stream(current)
            batch.fill([], [], [])
            with torch.cuda.stream(side):
                warm = self.step(batch)  # lazy initialisations happen outside the capture
            current.wait_stream(side)
            if self._logits is None:
                self._logits = torch.empty((self.row_buckets[-1], warm.shape[1]), dtype=warm.dtype, device=self.device)
            logits = self._logits[: key[0]]
        except Exception as exc:  # noqa: BLE001 - this bucket runs eagerly from now on
            if side is not None:  # nothing the side stream still reads is freed under it
                current.wait_stream(side)
            self._fail(key, exc, everything=False)
        graph = torch.cuda.CUDAGraph()
        try:
            # thread_local: CUDA calls other threads make meanwhile (a server's) do not break the capture
            with torch.cuda.graph(graph, pool=self._pool, capture_error_mode="thread_local"):
                logits.copy_(self.step(batch))  # the step's own tensors are the pool's, for any graph
        except Exception as exc:  # noqa: BLE001 - the capture stream and the pool may be left broken
            torch.cuda.set_stream(current)
            self._fail(key, exc, everything=True)
        try:
            batch.fill_probe()
            expected = self.step(batch).clone()
            graph.replay()
            _check_replay(logits, expected)
        except Exception as exc:  # noqa: BLE001 - this bucket runs eagerly from now on
            self._fail(key, exc, everything=False)
        entry.graph, entry.logits = graph, logits
        logger.info("captured the decode graph for %d rows x %d blocks", *key)

    def _fail(self, key: tuple[int, int], exc: Exception, everything: bool) -> NoReturn:
        self._failed.add(key)
        self._entries.pop(key, None)
        if everything:
            self.disabled = f"{type(exc).__name__}: {exc}"
        logger.warning("decode graph for %d rows x %d blocks not captured (%s: %s); %s run eagerly", key[0], key[1],
                       type(exc).__name__, exc, "all decode steps" if everything else "those steps")
        raise RuntimeError(f"decode graph capture failed: {exc}") from exc
