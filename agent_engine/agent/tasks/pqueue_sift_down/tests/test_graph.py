"""Dijkstra on hand-made graphs and against Floyd-Warshall on random graphs."""

import math
import random
import unittest

from pqueue import Graph, dijkstra, shortest_path


def floyd_warshall(graph):
    nodes = graph.nodes()
    dist = {a: {b: (0 if a == b else math.inf) for b in nodes} for a in nodes}
    for a in nodes:
        for b, w in graph.neighbours(a):
            dist[a][b] = min(dist[a][b], w)
    for k in nodes:
        dk = dist[k]
        for a in nodes:
            da, dak = dist[a], dist[a][k]
            if dak == math.inf:
                continue
            for b in nodes:
                if dak + dk[b] < da[b]:
                    da[b] = dak + dk[b]
    return dist


def random_graph(rng, n, p):
    graph = Graph()
    for a in range(n):
        graph.edges.setdefault(a, [])
        for b in range(n):
            if a != b and rng.random() < p:
                graph.add_edge(a, b, rng.randint(1, 20))
    return graph


class GraphTest(unittest.TestCase):
    def test_a_small_graph(self):
        g = Graph()
        for a, b, w in [("a", "b", 4), ("a", "c", 1), ("c", "b", 2), ("b", "d", 1), ("c", "d", 5)]:
            g.add_edge(a, b, w)
        distance, _ = dijkstra(g, "a")
        self.assertEqual(distance, {"a": 0, "b": 3, "c": 1, "d": 4})
        self.assertEqual(shortest_path(g, "a", "d"), ["a", "c", "b", "d"])

    def test_unreachable_nodes(self):
        g = Graph()
        g.add_edge(1, 2, 3)
        g.add_edge(3, 1, 1)
        distance, _ = dijkstra(g, 1)
        self.assertEqual(distance[3], math.inf)
        self.assertIsNone(shortest_path(g, 1, 3))

    def test_negative_weights_are_refused(self):
        with self.assertRaises(ValueError):
            Graph().add_edge(1, 2, -1)

    def test_zero_weight_edges(self):
        g = Graph()
        g.add_edge(0, 1, 0)
        g.add_edge(1, 2, 0)
        self.assertEqual(dijkstra(g, 0)[0], {0: 0, 1: 0, 2: 0})

    def test_random_graphs_match_floyd_warshall(self):
        rng = random.Random(21)
        wrong = []
        for trial in range(80):
            graph = random_graph(rng, 45, 0.12)
            expected = floyd_warshall(graph)
            for source in graph.nodes():
                got, _ = dijkstra(graph, source)
                if got != expected[source]:
                    wrong.append((trial, source))
        self.assertFalse(wrong, f"{len(wrong)} sources differ from Floyd-Warshall")

    def test_paths_are_as_long_as_their_distance(self):
        rng = random.Random(22)
        for _ in range(60):
            graph = random_graph(rng, 40, 0.08)
            distance, _ = dijkstra(graph, 0)
            for target in graph.nodes():
                path = shortest_path(graph, 0, target)
                if path is None:
                    self.assertEqual(distance[target], math.inf)
                    continue
                weight = sum(min(w for b, w in graph.neighbours(a) if b == c) for a, c in zip(path, path[1:], strict=False))
                self.assertEqual(weight, distance[target])


if __name__ == "__main__":
    unittest.main()
