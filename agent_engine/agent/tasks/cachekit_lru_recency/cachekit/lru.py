"""A least-recently-used cache: a dict for lookups and a doubly linked list for the order of use.

The list runs from the most recently used entry (just after the head sentinel) to the least recently
used one (just before the tail sentinel). Every ``get`` that finds its key and every ``put`` counts as a
use and moves the entry to the front; when a ``put`` would exceed the capacity, the entry at the back
is evicted. ``in``, ``len`` and ``keys`` do not count as uses.
"""


class _Node:
    __slots__ = ("key", "value", "prev", "next")

    def __init__(self, key=None, value=None):
        self.key, self.value = key, value
        self.prev = self.next = None


class LRUCache:
    def __init__(self, capacity):
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._map = {}
        self._head, self._tail = _Node(), _Node()
        self._head.next, self._tail.prev = self._tail, self._head
        self.hits = self.misses = self.evictions = 0

    def __len__(self):
        return len(self._map)

    def __contains__(self, key):
        return key in self._map

    def get(self, key, default=None):
        """The value stored under ``key`` (a use), or ``default``."""
        node = self._map.get(key)
        if node is None:
            self.misses += 1
            return default
        self.hits += 1
        return node.value

    def put(self, key, value):
        """Store ``value`` under ``key`` (a use); evicts the least recently used entry when full."""
        node = self._map.get(key)
        if node is not None:
            node.value = value
            self._move_to_front(node)
            return
        if len(self._map) >= self.capacity:
            self._evict()
        node = _Node(key, value)
        self._map[key] = node
        self._link_front(node)

    def delete(self, key):
        """Remove ``key``; True when it was there."""
        node = self._map.pop(key, None)
        if node is None:
            return False
        self._unlink(node)
        return True

    def keys(self):
        """The keys from the most to the least recently used."""
        out, node = [], self._head.next
        while node is not self._tail:
            out.append(node.key)
            node = node.next
        return out

    def clear(self):
        self._map.clear()
        self._head.next, self._tail.prev = self._tail, self._head

    def _evict(self):
        node = self._tail.prev
        self._unlink(node)
        del self._map[node.key]
        self.evictions += 1

    def _link_front(self, node):
        node.prev, node.next = self._head, self._head.next
        self._head.next.prev = node
        self._head.next = node

    def _unlink(self, node):
        node.prev.next, node.next.prev = node.next, node.prev
        node.prev = node.next = None

    def _move_to_front(self, node):
        self._unlink(node)
        self._link_front(node)
