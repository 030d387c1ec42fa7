"""``lru_memoize``: remember a function's results in an LRUCache, like functools.lru_cache."""

import functools
from dataclasses import dataclass

from cachekit.lru import LRUCache

_MISSING = object()


@dataclass(frozen=True)
class CacheInfo:
    hits: int
    misses: int
    maxsize: int
    currsize: int


def _key(args, kwargs):
    return args if not kwargs else args + (_MISSING,) + tuple(sorted(kwargs.items()))


def lru_memoize(maxsize=128):
    """Decorate a function of hashable arguments: results are cached, the least recently used dropped."""
    def decorate(fn):
        cache = LRUCache(maxsize)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            key = _key(args, kwargs)
            value = cache.get(key, _MISSING)
            if value is _MISSING:
                value = fn(*args, **kwargs)
                cache.put(key, value)
            return value

        wrapper.cache_info = lambda: CacheInfo(cache.hits, cache.misses, maxsize, len(cache))
        wrapper.cache_clear = cache.clear
        return wrapper

    return decorate
