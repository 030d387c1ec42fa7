"""A binary min-heap over comparable items, stored in a list.

Invariant: for every index i, ``items[i] <= items[2*i + 1]`` and ``items[i] <= items[2*i + 2]`` (where
those exist), so ``items[0]`` is always a smallest item.
"""


class MinHeap:
    def __init__(self, items=()):
        self.items = list(items)
        for i in reversed(range(len(self.items) // 2)):
            self._sift_down(i)

    def __len__(self):
        return len(self.items)

    def __bool__(self):
        return bool(self.items)

    def push(self, item):
        """Add ``item``."""
        self.items.append(item)
        self._sift_up(len(self.items) - 1)

    def peek(self):
        """A smallest item (IndexError when empty)."""
        if not self.items:
            raise IndexError("peek from an empty heap")
        return self.items[0]

    def pop(self):
        """Remove and return a smallest item (IndexError when empty)."""
        if not self.items:
            raise IndexError("pop from an empty heap")
        last = self.items.pop()
        if not self.items:
            return last
        top, self.items[0] = self.items[0], last
        self._sift_down(0)
        return top

    def pushpop(self, item):
        """Push ``item``, then pop and return a smallest item (faster than both)."""
        if self.items and self.items[0] < item:
            item, self.items[0] = self.items[0], item
            self._sift_down(0)
        return item

    def replace(self, item):
        """Pop and return a smallest item, then push ``item`` (IndexError when empty)."""
        top = self.peek()
        self.items[0] = item
        self._sift_down(0)
        return top

    def _sift_up(self, i):
        items = self.items
        item = items[i]
        while i > 0:
            parent = (i - 1) // 2
            if not item < items[parent]:
                break
            items[i] = items[parent]
            i = parent
        items[i] = item

    def _sift_down(self, i):
        items, n = self.items, len(self.items)
        item = items[i]
        while True:
            child = 2 * i + 1
            if child >= n:
                break
            if child + 1 < n and items[child] < items[child + 1]:
                child += 1
            if not items[child] < item:
                break
            items[i] = items[child]
            i = child
        items[i] = item


def heapsort(values):
    """A sorted copy of ``values``."""
    heap = MinHeap(values)
    return [heap.pop() for _ in range(len(heap))]
