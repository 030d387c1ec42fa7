import unittest

from cachekit import CacheInfo, lru_memoize


class MemoizeTest(unittest.TestCase):
    def test_results_are_cached(self):
        calls = []

        @lru_memoize(maxsize=4)
        def square(x):
            calls.append(x)
            return x * x

        self.assertEqual([square(3), square(3), square(4)], [9, 9, 16])
        self.assertEqual(calls, [3, 4])
        self.assertEqual(square.cache_info(), CacheInfo(hits=1, misses=2, maxsize=4, currsize=2))

    def test_fibonacci_is_linear(self):
        @lru_memoize(maxsize=200)
        def fib(n):
            return n if n < 2 else fib(n - 1) + fib(n - 2)

        self.assertEqual(fib(150), 9969216677189303386214405760200)
        self.assertEqual(fib.cache_info().misses, 151)

    def test_keyword_arguments_are_part_of_the_key(self):
        @lru_memoize()
        def power(x, exponent=2):
            return x ** exponent

        self.assertEqual((power(2), power(2, exponent=3), power(2, exponent=3)), (4, 8, 8))
        self.assertEqual(power.cache_info().hits, 1)

    def test_a_recently_read_result_survives(self):
        calls = []

        @lru_memoize(maxsize=2)
        def ident(x):
            calls.append(x)
            return x

        for x in (1, 2, 1, 3, 1):
            ident(x)
        self.assertEqual(calls, [1, 2, 3])

    def test_cache_clear(self):
        @lru_memoize(maxsize=2)
        def ident(x):
            return x

        ident(1)
        ident.cache_clear()
        self.assertEqual(ident.cache_info().currsize, 0)

    def test_wraps_keeps_the_name(self):
        @lru_memoize()
        def named():
            """Doc."""

        self.assertEqual((named.__name__, named.__doc__), ("named", "Doc."))


if __name__ == "__main__":
    unittest.main()
