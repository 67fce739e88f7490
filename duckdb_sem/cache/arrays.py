"""Whole answer arrays of one operator over one batch, remembered beside the persistent cache.

A repeated query asks its operators the same batches again: every row's answer is in the
cache, but looking each one up (render, sign, SQLite) costs tens of microseconds a row. An
:class:`AnswerArrays` keeps, in memory and bounded, the answer array of each (operator, batch)
a cache-backed connection computed, keyed by a digest of the operator's identity and of the
input arrays' bytes; a repeat is then one hash of the batch. Only answers that came back whole
(no failure) are kept, and only for connections with a persistent cache, whose repeats would
have read the same answers from it.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

__all__ = ["AnswerArrays", "Remembered", "array_digest"]


@dataclass(frozen=True, slots=True)
class Remembered:
    """An operator's answers to one batch, and the query counters a cached run adds."""

    values: pa.Array
    counts: tuple[tuple[str, float], ...]


def array_digest(identity: Sequence[Any], args: Sequence[pa.Array]) -> bytes:
    """A digest of ``identity`` (what decides the answers besides the rows) and of the
    arrays' logical content (type, offset, length and buffers: equal digests, equal arrays)."""
    digest = hashlib.sha256(repr(tuple(identity)).encode("utf-8", "surrogatepass"))
    for array in args:
        chunks = array.chunks if isinstance(array, pa.ChunkedArray) else [array]
        digest.update(f"|{array.type}|{len(array)}|{len(chunks)}".encode())
        for chunk in chunks:
            digest.update(f"/{chunk.offset}:{len(chunk)}".encode())
            for buffer in chunk.buffers():
                digest.update(b"-" if buffer is None else memoryview(buffer))
    return digest.digest()


class AnswerArrays:
    """A bounded LRU map digest -> :class:`Remembered`; thread-safe."""

    def __init__(self, capacity: int = 256) -> None:
        self.capacity = capacity
        self._items: OrderedDict[bytes, Remembered] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: bytes) -> Remembered | None:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def put(self, key: bytes, value: Remembered) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
