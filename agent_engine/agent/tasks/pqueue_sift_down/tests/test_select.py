import random
import unittest

from pqueue import merge_sorted, nsmallest


class SelectTest(unittest.TestCase):
    def test_nsmallest(self):
        self.assertEqual(nsmallest(3, [7, 1, 8, 2, 9, 3]), [1, 2, 3])

    def test_nsmallest_more_than_there_are(self):
        self.assertEqual(nsmallest(10, [3, 1]), [1, 3])

    def test_nsmallest_zero(self):
        self.assertEqual(nsmallest(0, [3, 1]), [])

    def test_merge(self):
        self.assertEqual(merge_sorted([1, 4, 7], [2, 5], [0, 3, 6, 8]), list(range(9)))

    def test_merge_with_empty_sequences(self):
        self.assertEqual(merge_sorted([], [1], []), [1])

    def test_random_nsmallest(self):
        rng = random.Random(31)
        wrong = 0
        for _ in range(3000):
            values = [rng.randint(0, 500) for _ in range(rng.randint(0, 80))]
            n = rng.randint(0, 20)
            wrong += nsmallest(n, values) != sorted(values)[:n]
        self.assertEqual(wrong, 0, "random nsmallest calls gave a wrong answer")

    def test_random_merges(self):
        rng = random.Random(32)
        wrong = 0
        for _ in range(3000):
            parts = [sorted(rng.randint(0, 100) for _ in range(rng.randint(0, 15))) for _ in range(rng.randint(1, 8))]
            wrong += merge_sorted(*parts) != sorted(x for p in parts for x in p)
        self.assertEqual(wrong, 0, "random merges gave a wrong answer")


if __name__ == "__main__":
    unittest.main()
