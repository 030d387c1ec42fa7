"""pqueue: a binary min-heap and the algorithms built on it (shortest paths, top-k, k-way merge)."""

from pqueue.graph import Graph, dijkstra, shortest_path
from pqueue.heap import MinHeap, heapsort
from pqueue.select import merge_sorted, nsmallest

__all__ = ["Graph", "MinHeap", "dijkstra", "heapsort", "merge_sorted", "nsmallest", "shortest_path"]
