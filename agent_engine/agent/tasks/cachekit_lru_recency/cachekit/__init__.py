"""cachekit: a least-recently-used cache and a memoizing decorator built on it."""

from cachekit.lru import LRUCache
from cachekit.memoize import CacheInfo, lru_memoize

__all__ = ["CacheInfo", "LRUCache", "lru_memoize"]
