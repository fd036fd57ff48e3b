"""A bounded, thread-safe map that forgets the least recently used entry first: the one LRU of
the worker's caches (meta-segment indexes, engines, function tables, Lance rows held)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LruCache(Generic[K, V]):
    """A bounded, thread-safe map that forgets the least recently used entry first."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._capacity:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[K]:
        """The keys, least recently used first."""
        with self._lock:
            return iter(list(self._items))
