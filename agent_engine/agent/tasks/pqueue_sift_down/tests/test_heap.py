import unittest

from pqueue import MinHeap, heapsort


def is_heap(items):
    return all(items[(i - 1) // 2] <= items[i] for i in range(1, len(items)))


class MinHeapTest(unittest.TestCase):
    def test_pop_returns_items_in_order(self):
        heap = MinHeap()
        for value in [5, 3, 8, 1, 9, 2]:
            heap.push(value)
        self.assertEqual([heap.pop() for _ in range(6)], [1, 2, 3, 5, 8, 9])

    def test_peek_does_not_remove(self):
        heap = MinHeap([4, 2, 7])
        self.assertEqual(heap.peek(), 2)
        self.assertEqual(len(heap), 3)

    def test_empty_heap_raises(self):
        heap = MinHeap()
        with self.assertRaises(IndexError):
            heap.pop()
        with self.assertRaises(IndexError):
            heap.peek()
        self.assertFalse(heap)

    def test_heapify_builds_a_valid_heap(self):
        heap = MinHeap([9, 8, 7, 6, 5, 4, 3, 2, 1, 0])
        self.assertTrue(is_heap(heap.items), heap.items)

    def test_pop_keeps_the_invariant(self):
        heap = MinHeap([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5])
        while heap:
            heap.pop()
            self.assertTrue(is_heap(heap.items), heap.items)

    def test_duplicates(self):
        self.assertEqual(heapsort([2, 2, 1, 1, 3, 3]), [1, 1, 2, 2, 3, 3])

    def test_pushpop_with_a_smaller_item_returns_it(self):
        heap = MinHeap([5, 6, 7])
        self.assertEqual(heap.pushpop(1), 1)
        self.assertEqual(sorted(heap.items), [5, 6, 7])

    def test_pushpop_with_a_larger_item(self):
        heap = MinHeap([5, 6, 7])
        self.assertEqual(heap.pushpop(10), 5)
        self.assertEqual(heapsort(heap.items), [6, 7, 10])

    def test_replace(self):
        heap = MinHeap([1, 10, 20, 30, 40])
        self.assertEqual(heap.replace(25), 1)
        self.assertEqual([heap.pop() for _ in range(5)], [10, 20, 25, 30, 40])

    def test_tuples_order_by_first_then_second(self):
        heap = MinHeap([(2, "b"), (1, "z"), (2, "a")])
        self.assertEqual([heap.pop() for _ in range(3)], [(1, "z"), (2, "a"), (2, "b")])

    def test_heapsort_strings(self):
        self.assertEqual(heapsort(["pear", "apple", "fig", "kiwi"]), ["apple", "fig", "kiwi", "pear"])

    def test_single_item(self):
        heap = MinHeap([42])
        self.assertEqual(heap.pop(), 42)
        self.assertEqual(len(heap), 0)


if __name__ == "__main__":
    unittest.main()
