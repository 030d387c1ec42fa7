"""Per-request block bookkeeping on top of the ``BlockPool``: prefix lookup, allocation, free.

Invariants:
- ``req_blocks[r]`` covers the first ``ceil(n / block_size)`` token slots of request ``r`` where
  ``n`` is the number of tokens scheduled so far; ``req_block_ids[r]`` mirrors it as integers.
- The first ``num_cached[r]`` blocks of ``r`` are registered in the prefix cache (or were hits), and
  only blocks whose KV a finished model step computed are ever registered.
- A request's blocks are freed tail first, so its tail is evicted before its head.
- With a second tier (``num_offload_blocks``), a hashed block the pool evicts is offered to the tier
  (``scheduler.kv_tier``), and a prefix lookup that misses the pool goes on in the tier: those blocks
  are allocated like new ones, loaded (``load_from_tier``) and count as computed, not as prefill.
  The tier reads which job an entry is worth keeping for from ``jobs``, the scheduler's job table.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice

from scheduler.block_pool import BlockPool, KVCacheBlock
from scheduler.clock import Clock, MonotonicClock
from scheduler.job_table import JobTable
from scheduler.kv_tier import KVTier
from scheduler.request import Request
from scheduler.tier_copy import PREFETCH


class KVCacheManager:
    def __init__(self, num_blocks: int, block_size: int, enable_caching: bool = True,
                 num_offload_blocks: int = 0, clock: Clock | None = None, jobs: JobTable | None = None) -> None:
        if block_size < 1:
            raise ValueError("block_size must be >= 1")
        if num_offload_blocks < 0:
            raise ValueError("num_offload_blocks must be >= 0")
        self.block_size = block_size
        self.enable_caching = enable_caching
        self.pool = BlockPool(num_blocks, enable_caching)
        self.clock = clock or MonotonicClock()
        self.tier = KVTier(num_offload_blocks, jobs) if (num_offload_blocks and enable_caching) else None
        if self.tier is not None:
            self.pool.on_evict = self._demote
        self.req_blocks: dict[str, list[KVCacheBlock]] = {}
        self.req_block_ids: dict[str, list[int]] = {}
        self.num_cached: dict[str, int] = {}
        # Prefix-cache statistics, counted once per successful admission.
        self.prefix_query_tokens = 0
        self.prefix_hit_tokens = 0

    # ---- prefix cache ------------------------------------------------------------------------
    def get_computed_blocks(self, request: Request) -> tuple[list[KVCacheBlock], int]:
        """Longest cached prefix of full blocks, never the whole prompt (>= 1 token left to compute)."""
        if not self.enable_caching:
            return [], 0
        max_blocks = (request.num_tokens - 1) // self.block_size
        hits: list[KVCacheBlock] = []
        get = self.pool.cached_block_map.get
        for h in islice(request.block_hashes, max_blocks):  # no copy: the walk stops at the first miss
            b = get(h)
            if b is None:
                break
            hits.append(b)
        return hits, len(hits) * self.block_size

    def tier_hit_blocks(self, request: Request, num_pool_hits: int) -> int:
        """How many blocks after the pool's ``num_pool_hits`` the tier holds, in chain order (never the
        whole prompt: >= 1 token is left to compute)."""
        if self.tier is None:
            return 0
        max_blocks = (request.num_tokens - 1) // self.block_size
        entries, n = self.tier.entries, num_pool_hits
        hashes = request.block_hashes
        while n < max_blocks and hashes[n] in entries:
            n += 1
        return n - num_pool_hits

    def load_from_tier(self, request: Request, start: int, count: int) -> None:
        """The request's blocks ``[start, start + count)``, just allocated, take their KV from the tier:
        the copies are listed for the runner and the blocks are registered as computed."""
        if not count:
            return
        assert self.tier is not None
        rid = request.request_id
        blocks, hashes = self.req_blocks[rid], request.block_hashes
        for i in range(start, start + count):
            self.tier.load(hashes[i], blocks[i].block_id)
            self.pool.cache_block(blocks[i], hashes[i])
            blocks[i].owner = request.job_id
        self.num_cached[rid] = start + count

    def prefetch(self, job_id: str, blocks: Sequence[KVCacheBlock]) -> None:
        """Move all of ``job_id``'s tier entries up into ``blocks`` (free pool blocks, one per entry, the
        caller's choice; cached ones are evicted, and demoted if worth it), ahead of its next turn: they
        wait there cached-free for its prefix lookup (evictable, demoted again if evicted)."""
        assert self.tier is not None
        hashes = self.tier.entries_of(job_id)
        if len(hashes) != len(blocks):
            raise ValueError(f"prefetch of {len(hashes)} entries into {len(blocks)} blocks")
        with self.tier.protecting(hashes):  # the demotions below never evict what is being moved up
            self.pool.take_free_blocks(blocks)
        for h, b in zip(hashes, blocks, strict=True):
            self.tier.load(h, b.block_id, PREFETCH)
            self.pool.cache_block(b, h)
            b.owner = job_id
        self.pool.free_blocks(blocks)  # the tier's order: the block demoted first is evicted first

    def _demote(self, block: KVCacheBlock) -> None:
        assert self.tier is not None and block.block_hash is not None
        self.tier.save(block.block_hash, block.block_id, block.owner, self.clock.now())

    def take_copies(self) -> list[tuple[int, int, int]]:
        """Tier copies decided since the last call, in order (empty without a tier)."""
        return self.tier.take_copies() if self.tier is not None and self.tier.copies else []

    def reset_prefix_cache(self) -> bool:
        """Forget every cached block, in the pool and in the tier; only when no block is in use."""
        if not self.pool.reset_prefix_cache():
            return False
        if self.tier is not None:
            self.tier.clear()
        return True

    def record_prefix_query(self, num_query_tokens: int, num_hit_tokens: int) -> None:
        self.prefix_query_tokens += num_query_tokens
        self.prefix_hit_tokens += num_hit_tokens

    # ---- allocation --------------------------------------------------------------------------
    def _num_required(
        self, request: Request, num_new_tokens: int, new_computed_blocks: Sequence[KVCacheBlock]
    ) -> tuple[int, int]:
        """(new blocks ``allocate_slots`` must take, free blocks it may take for them)."""
        held = len(self.req_blocks.get(request.request_id, ()))
        bs = self.block_size
        total_tokens = request.num_computed_tokens + len(new_computed_blocks) * bs + num_new_tokens
        num_required = -(-total_tokens // bs) - held - len(new_computed_blocks)
        # Hits sitting in the free queue leave it when touched, so they cost capacity too.
        num_evictable_hits = sum(1 for b in new_computed_blocks if b.ref_cnt == 0)
        return num_required, self.pool.num_free_blocks - num_evictable_hits

    def blocks_short(
        self, request: Request, num_new_tokens: int, new_computed_blocks: Sequence[KVCacheBlock] = ()
    ) -> int:
        """How many more free blocks ``allocate_slots`` with these arguments needs (<= 0: it fits)."""
        required, available = self._num_required(request, num_new_tokens, new_computed_blocks)
        return required - available

    def allocate_slots(
        self,
        request: Request,
        num_new_tokens: int,
        new_computed_blocks: Sequence[KVCacheBlock] = (),
    ) -> list[KVCacheBlock] | None:
        """Make room for ``num_new_tokens`` more tokens after the computed ones.

        ``new_computed_blocks`` are prefix hits not yet owned by the request (first admission).
        Returns the newly allocated blocks, or None (and changes nothing) if the pool is short.
        """
        rid = request.request_id
        blocks = self.req_blocks.get(rid)
        bs = self.block_size
        if blocks is not None and not new_computed_blocks:
            # Fast path (steady decode): the tokens fit in the blocks already held.
            if request.num_computed_tokens + num_new_tokens <= len(blocks) * bs:
                return []
        num_required, available = self._num_required(request, num_new_tokens, new_computed_blocks)
        if num_required > available:
            return None
        if blocks is None:
            blocks = self.req_blocks[rid] = []
            ids = self.req_block_ids[rid] = []
            self.num_cached[rid] = 0
        else:
            ids = self.req_block_ids[rid]
        if new_computed_blocks:
            self.pool.touch(new_computed_blocks)
            for b in new_computed_blocks:
                b.owner = request.job_id
            blocks.extend(new_computed_blocks)
            ids.extend(b.block_id for b in new_computed_blocks)
            self.num_cached[rid] = len(blocks)
        new_blocks = self.pool.get_new_blocks(num_required) if num_required > 0 else []
        if new_blocks:
            blocks.extend(new_blocks)
            ids.extend(b.block_id for b in new_blocks)
        return new_blocks

    def cache_computed_blocks(self, request: Request) -> None:
        """Register the request's blocks that ``num_computed_tokens`` fill completely.

        Called after the model step that computed them, never at allocation: a block whose KV was
        not written (its step failed, or its request was preempted after being scheduled) must
        never become findable.
        """
        rid = request.request_id
        num_full = request.num_computed_tokens // self.block_size
        start = self.num_cached.get(rid)
        if start is None or num_full <= start:
            return
        blocks = self.req_blocks[rid]
        hashes = request.block_hashes
        cache_block, job = self.pool.cache_block, request.job_id
        for i in range(start, num_full):
            cache_block(blocks[i], hashes[i])
            blocks[i].owner = job
        if self.tier is not None:  # a hash lives in one tier only: a recomputed block's copy leaves
            for h in hashes[start:num_full]:
                self.tier.discard(h)
        self.num_cached[rid] = num_full

    def free(self, request: Request) -> None:
        """Release all of a request's blocks, tail first."""
        blocks = self.take_blocks(request.request_id)
        self.free_block_list(blocks)

    def take_blocks(self, request_id: str) -> list[KVCacheBlock]:
        """Detach a request's blocks without dropping their references (a pin takes them over)."""
        blocks = self.req_blocks.pop(request_id, [])
        self._forget(request_id)
        return blocks

    def free_block_list(self, blocks: Sequence[KVCacheBlock]) -> None:
        """Drop one reference from each of ``blocks`` (in request order), tail first."""
        self.pool.free_blocks(reversed(blocks))

    def _forget(self, request_id: str) -> None:
        self.req_blocks.pop(request_id, None)
        self.req_block_ids.pop(request_id, None)
        self.num_cached.pop(request_id, None)
