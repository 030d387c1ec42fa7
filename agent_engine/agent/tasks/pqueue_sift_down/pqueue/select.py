"""Selections built on MinHeap: the n smallest items, and a k-way merge of sorted sequences."""

from pqueue.heap import MinHeap


def nsmallest(n, values):
    """The ``n`` smallest of ``values``, in order."""
    if n <= 0:
        return []
    heap = MinHeap()
    for value in values:
        heap.push(value)
    return [heap.pop() for _ in range(min(n, len(heap)))]


def merge_sorted(*sequences):
    """One sorted list from several sorted sequences (stable: equal items keep the sequences' order)."""
    heap = MinHeap()
    iterators = [iter(s) for s in sequences]
    for index, it in enumerate(iterators):
        for value in it:
            heap.push((value, index))
            break
    out = []
    while heap:
        value, index = heap.pop()
        out.append(value)
        for nxt in iterators[index]:
            heap.push((nxt, index))
            break
    return out
