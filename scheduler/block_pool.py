"""The KV block pool: blocks, the doubly-linked free queue, and the prefix-cache hash map.

Invariants:
- Block 0 is the null block: reserved, never allocated, never freed (pads block tables).
- Every other block is either in the free queue (``ref_cnt == 0``) or referenced (``ref_cnt > 0``),
  never both. ``num_free_blocks + num_used_blocks == num_blocks - 1``.
- A free block may still carry a hash and be findable in the cache map ("cached-free"): it is
  evicted lazily, only when it is popped from the queue head for reuse (LRU from the head).
- ``cached_block_map[h]`` holds exactly the blocks whose ``block_hash == h``.
- ``on_evict`` (when set) sees every hashed block just before its hash is forgotten for reuse, while
  its KV is still intact: the second tier's chance to demote it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator


class KVCacheBlock:
    """One KV block: id, reference count, optional hash, and intrusive free-queue links."""

    __slots__ = ("block_id", "ref_cnt", "block_hash", "prev_free", "next_free", "is_null", "owner")

    def __init__(self, block_id: int) -> None:
        self.block_id = block_id
        self.ref_cnt = 0
        self.block_hash: int | None = None
        self.owner: str | None = None  # the job whose turn last computed or hit this block
        self.prev_free: KVCacheBlock | None = None
        self.next_free: KVCacheBlock | None = None
        self.is_null = False

    def __repr__(self) -> str:
        return f"KVCacheBlock(id={self.block_id}, ref={self.ref_cnt}, hash={self.block_hash})"


class FreeBlockQueue:
    """Doubly-linked list of free blocks with O(1) popleft, append and remove from the middle.

    Uses sentinel head/tail nodes so no operation needs a branch on emptiness of neighbours.
    """

    def __init__(self, blocks: Iterable[KVCacheBlock]) -> None:
        self._head = KVCacheBlock(-1)
        self._tail = KVCacheBlock(-2)
        self._head.next_free = self._tail
        self._tail.prev_free = self._head
        self.num_free_blocks = 0
        for b in blocks:
            self.append(b)

    def popleft(self) -> KVCacheBlock:
        first = self._head.next_free
        if first is self._tail or first is None:
            raise ValueError("no free blocks")
        self.remove(first)
        return first

    def remove(self, block: KVCacheBlock) -> None:
        prev, nxt = block.prev_free, block.next_free
        if prev is None or nxt is None:
            raise RuntimeError(f"{block} is not in the free queue")
        prev.next_free = nxt
        nxt.prev_free = prev
        block.prev_free = block.next_free = None
        self.num_free_blocks -= 1

    def append(self, block: KVCacheBlock) -> None:
        if block.prev_free is not None or block.next_free is not None:
            raise RuntimeError(f"{block} is already in the free queue")
        last = self._tail.prev_free
        assert last is not None
        last.next_free = block
        block.prev_free = last
        block.next_free = self._tail
        self._tail.prev_free = block
        self.num_free_blocks += 1

    def block_ids(self) -> list[int]:
        """Free block ids from head (next to evict) to tail; O(n), for tests and debugging."""
        out = []
        cur = self._head.next_free
        while cur is not None and cur is not self._tail:
            out.append(cur.block_id)
            cur = cur.next_free
        return out


class BlockPool:
    """Owns all blocks; hands them out, takes them back, and indexes full blocks by hash."""

    def __init__(self, num_blocks: int, enable_caching: bool = True) -> None:
        if num_blocks < 2:
            raise ValueError("a block pool needs at least 2 blocks (one is the reserved null block)")
        self.num_blocks = num_blocks
        self.enable_caching = enable_caching
        self.blocks = [KVCacheBlock(i) for i in range(num_blocks)]
        self.null_block = self.blocks[0]
        self.null_block.is_null = True
        self.free_queue = FreeBlockQueue(self.blocks[1:])
        self.cached_block_map: dict[int, KVCacheBlock] = {}
        # A cached-free block is a free block that still carries a hash.
        self.num_cached_free = 0
        # Event counts that only grow: blocks returned to the free queue, and hashes evicted (forgotten).
        # ``BlockedAdmissionMemo`` watches them: only these events can turn a blocked admission admissible.
        self.num_frees = 0
        self.num_evictions = 0
        self.on_evict: Callable[[KVCacheBlock], None] | None = None

    # ---- counts ------------------------------------------------------------------------------
    @property
    def num_free_blocks(self) -> int:
        """Blocks an allocation may take: empty plus cached-free (evictable)."""
        return self.free_queue.num_free_blocks

    @property
    def num_used_blocks(self) -> int:
        return self.num_blocks - 1 - self.free_queue.num_free_blocks

    @property
    def num_empty_blocks(self) -> int:
        return self.free_queue.num_free_blocks - self.num_cached_free

    # ---- prefix cache ------------------------------------------------------------------------
    def cache_block(self, block: KVCacheBlock, block_hash: int) -> None:
        """Register a full, in-use block under its hash (first writer wins for a given hash)."""
        if not self.enable_caching or block.block_hash is not None:
            return
        if block_hash in self.cached_block_map:
            return  # Same content computed twice; keep the first, the duplicate stays unhashed.
        block.block_hash = block_hash
        self.cached_block_map[block_hash] = block

    # ---- allocation --------------------------------------------------------------------------
    def get_new_blocks(self, n: int) -> list[KVCacheBlock]:
        """Pop ``n`` blocks from the queue head (LRU), evicting their hashes; each gets ref 1."""
        q = self.free_queue
        if n > q.num_free_blocks:
            raise ValueError(f"cannot allocate {n} blocks: only {q.num_free_blocks} free")
        out = []
        head = q._head
        for _ in range(n):
            b = head.next_free
            nxt = b.next_free  # type: ignore[union-attr]
            head.next_free = nxt
            nxt.prev_free = head  # type: ignore[union-attr]
            b.prev_free = b.next_free = None  # type: ignore[union-attr]
            if b.block_hash is not None:  # type: ignore[union-attr]
                self._evict_hash(b)  # type: ignore[arg-type]
            b.ref_cnt = 1  # type: ignore[union-attr]
            out.append(b)
        q.num_free_blocks -= n
        return out  # type: ignore[return-value]

    def free_from_head(self) -> Iterator[KVCacheBlock]:
        """The free blocks from the queue head (next to evict) to the tail; take none while iterating."""
        cur = self.free_queue._head.next_free
        while cur is not None and cur is not self.free_queue._tail:
            yield cur
            cur = cur.next_free

    def take_free_blocks(self, blocks: Iterable[KVCacheBlock]) -> None:
        """Take these free blocks out of the queue, evicting their hashes as ``get_new_blocks`` would
        (``on_evict`` sees each first); each gets ref 1."""
        for b in blocks:
            if b.ref_cnt != 0 or b.is_null:
                raise RuntimeError(f"{b} is not free")
            self.free_queue.remove(b)
            if b.block_hash is not None:
                self._evict_hash(b)
            b.ref_cnt = 1

    def _evict_hash(self, b: KVCacheBlock) -> None:
        """Forget a cached-free block's hash, just taken from the queue for reuse (demoted first)."""
        if self.on_evict is not None:
            self.on_evict(b)
        self.num_cached_free -= 1
        if self.cached_block_map.get(b.block_hash) is b:  # type: ignore[arg-type]
            del self.cached_block_map[b.block_hash]  # type: ignore[arg-type]
        b.block_hash = None
        self.num_evictions += 1

    def touch(self, blocks: Iterable[KVCacheBlock]) -> None:
        """Take one more reference on each block; a free (cached) block leaves the free queue."""
        for b in blocks:
            if b.ref_cnt == 0 and not b.is_null:
                self.free_queue.remove(b)
                if b.block_hash is not None:
                    self.num_cached_free -= 1
            b.ref_cnt += 1

    def free_blocks(self, ordered_blocks: Iterable[KVCacheBlock]) -> None:
        """Drop one reference from each block, in the given order (callers pass tail-first).

        A block reaching ref 0 goes to the queue tail; hashed ones stay findable (lazy eviction).
        """
        q = self.free_queue
        tail = q._tail
        freed = 0
        cached_free = 0
        for b in ordered_blocks:
            if b.is_null:
                continue
            if b.ref_cnt <= 0:
                raise RuntimeError(f"double free of {b}")
            b.ref_cnt -= 1
            if b.ref_cnt == 0:
                last = tail.prev_free
                last.next_free = b  # type: ignore[union-attr]
                b.prev_free = last
                b.next_free = tail
                tail.prev_free = b
                freed += 1
                if b.block_hash is not None:
                    cached_free += 1
        q.num_free_blocks += freed
        self.num_frees += freed
        self.num_cached_free += cached_free

    def reset_prefix_cache(self) -> bool:
        """Forget all hashes; only possible when no block is in use."""
        if self.num_used_blocks != 0:
            return False
        for b in self.blocks:
            b.block_hash = None
        self.num_evictions += len(self.cached_block_map)
        self.cached_block_map.clear()
        self.num_cached_free = 0
        return True
