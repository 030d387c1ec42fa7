"""Weighted directed graphs and Dijkstra's shortest paths on a MinHeap."""

import math

from pqueue.heap import MinHeap


class Graph:
    """A directed graph with non-negative edge weights."""

    def __init__(self):
        self.edges = {}

    def add_edge(self, a, b, weight):
        if weight < 0:
            raise ValueError("weights must be non-negative")
        self.edges.setdefault(a, []).append((b, weight))
        self.edges.setdefault(b, [])

    def nodes(self):
        return list(self.edges)

    def neighbours(self, node):
        return self.edges.get(node, [])


def dijkstra(graph, source):
    """``(distance, previous)``: the shortest distance to every node reachable from ``source`` (math.inf
    for the others) and each reached node's predecessor on one shortest path."""
    distance = {node: math.inf for node in graph.nodes()}
    previous = {}
    distance[source] = 0
    heap = MinHeap([(0, source)])
    while heap:
        d, node = heap.pop()
        if d > distance[node]:
            continue  # a stale entry: node was reached more cheaply meanwhile
        for neighbour, weight in graph.neighbours(node):
            candidate = d + weight
            if candidate < distance[neighbour]:
                distance[neighbour] = candidate
                previous[neighbour] = node
                heap.push((candidate, neighbour))
    return distance, previous


def shortest_path(graph, source, target):
    """The nodes of one shortest path from ``source`` to ``target`` (None when there is none)."""
    distance, previous = dijkstra(graph, source)
    if distance.get(target, math.inf) == math.inf:
        return None
    path = [target]
    while path[-1] != source:
        path.append(previous[path[-1]])
    return path[::-1]
