"""A small thread-safe LRU map for the launcher's host-side caches (recorded launches, Warp views)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any


class LRU:
    """``get``/``put`` keyed by hashable tuples; the least recently used entry goes past ``maxsize``."""

    def __init__(self, maxsize: int):
        self.maxsize = maxsize
        self._d: OrderedDict[tuple, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple) -> Any:
        with self._lock:
            v = self._d.get(key)
            if v is not None:
                self._d.move_to_end(key)
            return v

    def peek(self, key: tuple) -> Any:
        """``get`` without marking the entry recently used (no lock: one dict read is atomic)."""
        return self._d.get(key)

    def put(self, key: tuple, value: Any) -> None:
        with self._lock:
            self._d[key] = value
            while len(self._d) > self.maxsize:
                self._d.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._d.clear()

    def __len__(self) -> int:
        return len(self._d)

    def values(self):
        with self._lock:
            return list(self._d.values())
