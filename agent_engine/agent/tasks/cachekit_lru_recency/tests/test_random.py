"""LRUCache against a reference model (collections.OrderedDict) on long random workloads."""

import random
import unittest
from collections import OrderedDict

from cachekit import LRUCache, lru_memoize


class Reference:
    """The textbook LRU cache on an OrderedDict: the last key is the most recently used."""

    def __init__(self, capacity):
        self.capacity, self.data = capacity, OrderedDict()

    def get(self, key, default=None):
        if key not in self.data:
            return default
        self.data.move_to_end(key)
        return self.data[key]

    def put(self, key, value):
        if key in self.data:
            self.data.move_to_end(key)
        elif len(self.data) >= self.capacity:
            self.data.popitem(last=False)
        self.data[key] = value

    def delete(self, key):
        return self.data.pop(key, None) is not None

    def keys(self):
        return list(reversed(self.data))


def run_workload(seed, capacity, steps, key_space, zipf):
    """The first step at which LRUCache and the reference disagree (the whole workload runs), or None."""
    rng = random.Random(seed)
    cache, ref = LRUCache(capacity), Reference(capacity)
    weights = [1 / (k + 1) ** zipf for k in range(key_space)]
    keys = rng.choices(range(key_space), weights, k=steps)
    first = None
    for step, key in enumerate(keys):
        roll = rng.random()
        if roll < 0.55:
            op, got, want = "get", cache.get(key), ref.get(key)
        elif roll < 0.95:
            op, got, want = "put", cache.put(key, step), ref.put(key, step)
        else:
            op, got, want = "delete", cache.delete(key), ref.delete(key)
        if first is None and (got != want or len(cache) != len(ref.data)):
            first = f"step {step}: {op}({key}) gave {got}, the reference {want}"
        if first is None and step % 50 == 0 and cache.keys() != ref.keys():
            first = f"step {step}: keys {cache.keys()[:8]}..., the reference {ref.keys()[:8]}..."
    return first


class RandomWorkloadTest(unittest.TestCase):
    def check_workloads(self, seeds, capacity, steps, key_space, zipf):
        wrong = [(s, r) for s in seeds if (r := run_workload(s, capacity, steps, key_space, zipf)) is not None]
        if wrong:
            self.fail(f"{len(wrong)} of {len(seeds)} workloads diverge; seed {wrong[0][0]}: {wrong[0][1]}")

    def test_small_caches_uniform_keys(self):
        self.check_workloads(range(200), 4, 3000, 12, 0.0)

    def test_medium_caches_skewed_keys(self):
        self.check_workloads(range(100, 190), 32, 8000, 200, 1.1)

    def test_large_caches(self):
        self.check_workloads(range(200, 216), 512, 40000, 2000, 0.8)

    def test_capacity_one(self):
        self.check_workloads(range(300, 340), 1, 2000, 4, 0.0)

    def test_memoized_hit_counts_match_the_reference(self):
        rng = random.Random(400)
        for maxsize in (1, 8, 64):
            ref = Reference(maxsize)
            hits = 0

            @lru_memoize(maxsize=maxsize)
            def f(x):
                return -x

            for x in rng.choices(range(100), [1 / (k + 1) for k in range(100)], k=20000):
                if ref.get(x) is not None:
                    hits += 1
                else:
                    ref.put(x, -x)
                self.assertEqual(f(x), -x)
            self.assertEqual(f.cache_info().hits, hits, f"hits with maxsize {maxsize}")


if __name__ == "__main__":
    unittest.main()
