"""An O(1) re-check that the waiting head is still blocked, sparing the prefix walk of a failed admission.

A blocked head is re-tried every step; the full check walks its prefix hits (O(hit blocks): a preempted
long request keeps hundreds of cached-free hits). The memo records the last failed admission and
answers "still blocked" only while none of the events that can turn the verdict happened. For a fixed
waiting request these are all of them, each watched by one field:
- a block returned to the free queue (``BlockPool.num_frees``): free capacity grew;
- a cached block was evicted while some hit sat in the free queue (``BlockPool.num_evictions``): the
  hit chain may have shrunk, and a budget-limited chunk that no longer pays for an evictable hit can
  need fewer free blocks (with no evictable hit, no eviction can touch the hits);
- the next block of its hash chain was cached: its prefix hit would grow;
- the token budget shrank: a smaller chunk needs fewer blocks;
- the policy's state changed (``SchedulingPolicy.state_version``): it may free something now;
- another request became the head, or nothing runs any more (the caller checks that: the policy
  frees more then, so a blocked verdict is never reused with nothing running).
Everything else (allocations, other requests taking hits, other chains being cached) only shrinks the
free capacity or leaves this request's hits and cost as they were.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scheduler.block_pool import KVCacheBlock
from scheduler.kv_cache_manager import KVCacheManager
from scheduler.policy import SchedulingPolicy
from scheduler.request import Request


@dataclass(frozen=True)
class _BlockedAdmission:
    request_id: str
    num_hits: int
    budget: int
    num_frees: int
    num_evictions: int | None  # None: no hit was evictable, so no eviction can change the verdict
    policy_version: int


class BlockedAdmissionMemo:
    def __init__(self, kv: KVCacheManager, policy: SchedulingPolicy) -> None:
        self.kv = kv
        self.policy = policy
        self._last: _BlockedAdmission | None = None

    def record(self, req: Request, hits: Sequence[KVCacheBlock], budget: int) -> None:
        """``req`` with these prefix ``hits`` and this token ``budget`` could not be admitted."""
        pool = self.kv.pool
        evictable = any(b.ref_cnt == 0 for b in hits)
        self._last = _BlockedAdmission(req.request_id, len(hits), budget, pool.num_frees,
                                       pool.num_evictions if evictable else None, self.policy.state_version())

    def clear(self) -> None:
        self._last = None

    def still_blocked(self, req: Request, budget: int) -> bool:
        """True only if ``req`` failed last time and no event that could admit it happened since."""
        last = self._last
        if last is None or last.request_id != req.request_id:
            return False
        pool = self.kv.pool
        if last.num_frees != pool.num_frees or budget < last.budget:
            return False
        if last.policy_version != self.policy.state_version():
            return False
        if last.num_evictions is not None and last.num_evictions != pool.num_evictions:
            return False
        if self.kv.enable_caching and last.num_hits < (req.num_tokens - 1) // self.kv.block_size:
            if req.block_hashes[last.num_hits] in pool.cached_block_map:
                return False
        return True
