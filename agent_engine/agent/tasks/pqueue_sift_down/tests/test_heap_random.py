"""MinHeap against a plain sorted list on many random inputs and operation sequences."""

import random
import unittest

from pqueue import MinHeap, heapsort


def is_heap(items):
    return all(items[(i - 1) // 2] <= items[i] for i in range(1, len(items)))


class RandomHeapTest(unittest.TestCase):
    def report(self, wrong, total, what):
        if wrong:
            self.fail(f"{len(wrong)} of {total} {what} went wrong, e.g. {wrong[0]}")

    def test_heapsort_matches_sorted(self):
        rng = random.Random(11)
        wrong = []
        for _ in range(4000):
            values = [rng.randint(-1000, 1000) for _ in range(rng.randint(0, 60))]
            if heapsort(values) != sorted(values):
                wrong.append(values)
        self.report(wrong, 4000, "random lists")

    def test_heapify_is_a_heap(self):
        rng = random.Random(12)
        wrong = []
        for _ in range(5000):
            values = [rng.random() for _ in range(rng.randint(1, 50))]
            if not is_heap(MinHeap(values).items):
                wrong.append(values)
        self.report(wrong, 5000, "heapified lists")

    def test_random_operations_match_a_sorted_list(self):
        rng = random.Random(13)
        wrong = []
        for trial in range(2000):
            heap, model = MinHeap(), []
            for step in range(120):
                roll = rng.random()
                if roll < 0.5 or not model:
                    value = rng.randint(0, 99)
                    heap.push(value)
                    model.append(value)
                    model.sort()
                elif roll < 0.8:
                    got, want = heap.pop(), model.pop(0)
                    if got != want:
                        wrong.append(f"trial {trial} step {step}: pop gave {got}, expected {want}")
                        break
                else:
                    value = rng.randint(0, 99)
                    got = heap.pushpop(value)
                    model.append(value)
                    model.sort()
                    want = model.pop(0)
                    if got != want:
                        wrong.append(f"trial {trial} step {step}: pushpop gave {got}, expected {want}")
                        break
                if not is_heap(heap.items):
                    wrong.append(f"trial {trial} step {step}: the heap invariant broke")
                    break
        self.report(wrong, 2000, "operation sequences")

    def test_large_heaps(self):
        rng = random.Random(14)
        for size in (1000, 10000, 50000):
            values = [rng.randint(0, 10 * size) for _ in range(size)]
            self.assertEqual(heapsort(values), sorted(values), f"heapsort of {size} values")


if __name__ == "__main__":
    unittest.main()
