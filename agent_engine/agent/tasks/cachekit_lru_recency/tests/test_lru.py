import unittest

from cachekit import LRUCache


class LRUCacheTest(unittest.TestCase):
    def test_put_and_get(self):
        cache = LRUCache(2)
        cache.put("a", 1)
        self.assertEqual(cache.get("a"), 1)
        self.assertIsNone(cache.get("b"))
        self.assertEqual(cache.get("b", 0), 0)

    def test_the_least_recently_put_is_evicted(self):
        cache = LRUCache(2)
        cache.put("a", 1)
        cache.put("b", 2)
        cache.put("c", 3)
        self.assertNotIn("a", cache)
        self.assertEqual(cache.keys(), ["c", "b"])

    def test_a_get_makes_an_entry_recently_used(self):
        cache = LRUCache(2)
        cache.put("a", 1)
        cache.put("b", 2)
        cache.get("a")
        cache.put("c", 3)
        self.assertIn("a", cache)
        self.assertNotIn("b", cache)

    def test_keys_follow_use(self):
        cache = LRUCache(3)
        for k in "abc":
            cache.put(k, k)
        cache.get("a")
        self.assertEqual(cache.keys(), ["a", "c", "b"])

    def test_put_of_an_existing_key_updates_and_refreshes(self):
        cache = LRUCache(2)
        cache.put("a", 1)
        cache.put("b", 2)
        cache.put("a", 10)
        cache.put("c", 3)
        self.assertEqual(cache.get("a"), 10)
        self.assertNotIn("b", cache)

    def test_contains_is_not_a_use(self):
        cache = LRUCache(2)
        cache.put("a", 1)
        cache.put("b", 2)
        self.assertIn("a", cache)
        cache.put("c", 3)
        self.assertNotIn("a", cache)

    def test_delete(self):
        cache = LRUCache(2)
        cache.put("a", 1)
        self.assertTrue(cache.delete("a"))
        self.assertFalse(cache.delete("a"))
        self.assertEqual(len(cache), 0)

    def test_statistics(self):
        cache = LRUCache(1)
        cache.put("a", 1)
        cache.get("a")
        cache.get("b")
        cache.put("b", 2)
        self.assertEqual((cache.hits, cache.misses, cache.evictions), (1, 1, 1))

    def test_capacity_one(self):
        cache = LRUCache(1)
        cache.put("a", 1)
        cache.put("b", 2)
        self.assertEqual(cache.keys(), ["b"])

    def test_bad_capacity(self):
        with self.assertRaises(ValueError):
            LRUCache(0)

    def test_clear(self):
        cache = LRUCache(3)
        cache.put("a", 1)
        cache.clear()
        self.assertEqual((len(cache), cache.keys()), (0, []))

    def test_stored_none_is_a_hit(self):
        cache = LRUCache(2)
        cache.put("a", None)
        self.assertIsNone(cache.get("a", "missing"))


if __name__ == "__main__":
    unittest.main()
