"""Arrays onto the wire: PostgreSQL's ``array_out`` text and ``array_send`` binary.

A DuckDB list is a one-dimensional PostgreSQL array, a list of lists a two-dimensional one, and
so on; each element is written by its own type's encoder. In text an element is double-quoted
when ``array_out`` quotes it: empty, ``NULL`` in any case, or holding ``{ } , " \\`` or white
space (so a timestamp's space and a bytea's backslash are quoted). Binary carries the
dimensions, so a ragged list of lists, which no PostgreSQL array is, can only go out as text.

Example: ``text_array(text_str)(["a b", None, "", "x"])`` is ``b'{"a b",NULL,"",x}'``;
``text_array(text_str)([])`` is ``b"{}"``.
"""

from __future__ import annotations

import struct
from typing import Any

from duckdb_sem.errors import UnsendableValueError
from duckdb_sem.pgwire.encoders import Encoder

__all__ = ["bin_array", "text_array"]

_QUOTED = frozenset('{},"\\ \t\n\r\v\f')
_I32 = struct.Struct("!i")


def _item(text: str) -> str:
    if text == "" or text.upper() == "NULL" or not _QUOTED.isdisjoint(text):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def text_array(element: Encoder) -> Encoder:
    """The text encoder of arrays (nested lists: dimensions) of ``element``'s type."""

    def write(v: list[Any]) -> str:
        return (
            "{"
            + ",".join(
                "NULL"
                if x is None
                else write(x)
                if isinstance(x, list)
                else _item(element(x).decode("utf-8"))
                for x in v
            )
            + "}"
        )

    return lambda v: write(v).encode("utf-8")


def _dimensions(v: list[Any], depth: int) -> list[int]:
    """The length of each dimension of a rectangular nested list ``depth`` lists deep."""
    dims = [len(v)]
    level = v
    for _ in range(depth - 1):
        if not level:
            break
        if any(not isinstance(x, list) for x in level):
            raise UnsendableValueError(
                "a list of lists holding a NULL list cannot be sent as a binary PostgreSQL "
                "array: read the column in text format, or replace the NULL with []"
            )
        dims.append(len(level[0]))
        if any(len(x) != dims[-1] for x in level):
            raise UnsendableValueError(
                "a list of lists of different lengths cannot be sent as a binary PostgreSQL "
                "array (PostgreSQL's arrays are rectangular): read the column in text format"
            )
        level = [y for x in level for y in x]
    return dims if all(dims) else []


def bin_array(element_oid: int, element: Encoder, *, depth: int = 1) -> Encoder:
    """The binary encoder of ``depth``-dimensional arrays of type ``element_oid``."""

    def encode(v: list[Any]) -> bytes:
        dims = _dimensions(v, depth) if v else []
        items = v if dims else []
        for _ in range(len(dims) - 1):
            items = [y for x in items for y in x]
        has_null = any(x is None for x in items)
        head = struct.pack("!iii", len(dims), int(has_null), element_oid)
        parts = [head, *(struct.pack("!ii", n, 1) for n in dims)]
        for x in items:
            if x is None:
                parts.append(b"\xff\xff\xff\xff")
            else:
                data = element(x)
                parts.append(_I32.pack(len(data)) + data)
        return b"".join(parts)

    return encode
