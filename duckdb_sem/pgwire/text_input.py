"""Text bound parameters DuckDB would read differently from PostgreSQL's ``*_in`` functions.

Most text parameters are handed to DuckDB as strings of the declared type, and DuckDB's cast
reads them as PostgreSQL does (``42``, ``NaN``, ``2024-01-02 03:04:05+02``, ``1 day 02:00``).
Three forms differ and are read here: booleans (PostgreSQL takes any prefix of ``true``,
``false``, ``yes``, ``no``, ``on``, ``off`` with blanks around it), bytea (``\\x`` hex or the
backslash escape format; DuckDB's BLOB cast reads ``\\x00`` as one byte), and arrays (PostgreSQL
writes ``{1,2,NULL}`` and ``{{1,2},{3,4}}``, with double quotes and backslashes).

Example: ``parse_bool(" Of ")`` is ``False``; ``parse_bytea("\\\\x00ff")`` is ``b"\\x00\\xff"``;
``parse_array('{1,"a b",NULL}')`` is ``["1", "a b", None]``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["parse_array", "parse_bool", "parse_bytea"]

_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


def parse_bool(text: str) -> bool:
    """``boolin``: a unique prefix of a boolean word (``o`` alone is ambiguous)."""
    word = text.strip().lower()
    if word and word != "o":
        if any(t.startswith(word) for t in _TRUE):
            return True
        if any(f.startswith(word) for f in _FALSE):
            return False
    raise ValueError(f'invalid input syntax for type boolean: "{text}"')


def parse_bytea(text: str) -> bytes:
    """``byteain``: ``\\x`` then hex digits, or text with ``\\\\`` and ``\\nnn`` octal escapes."""
    if text.startswith("\\x"):
        return bytes.fromhex(text[2:])
    out = bytearray()
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\":
            out += c.encode("utf-8")
            i += 1
        elif text[i + 1 : i + 2] == "\\":
            out.append(0x5C)
            i += 2
        elif len(text) >= i + 4 and all(ch in "01234567" for ch in text[i + 1 : i + 4]):
            out.append(int(text[i + 1 : i + 4], 8) & 0xFF)
            i += 4
        else:
            raise ValueError("invalid input syntax for type bytea")
    return bytes(out)


def parse_array(text: str) -> list[Any]:
    """``array_in`` without its element types: nested lists of element strings, None for NULL.

    A leading dimension decoration (``[0:1]={...}``) is skipped, as the lower bound is not kept.
    """
    start = text.find("{") if text.lstrip().startswith("[") else 0
    items, at = _list(text, _skip(text, start))
    if _skip(text, at) != len(text):
        raise ValueError(f'malformed array literal: "{text}"')
    return items


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def _list(text: str, at: int) -> tuple[list[Any], int]:
    if text[at : at + 1] != "{":
        raise ValueError(f'malformed array literal: "{text}"')
    items: list[Any] = []
    at = _skip(text, at + 1)
    if text[at : at + 1] == "}":
        return items, at + 1
    while True:
        at = _skip(text, at)
        if text[at : at + 1] == "{":
            item, at = _list(text, at)
            items.append(item)
        else:
            value, at = _element(text, at)
            items.append(value)
        at = _skip(text, at)
        if text[at : at + 1] == "}":
            return items, at + 1
        if text[at : at + 1] != ",":
            raise ValueError(f'malformed array literal: "{text}"')
        at += 1


def _element(text: str, at: int) -> tuple[str | None, int]:
    if text[at : at + 1] == '"':
        out = []
        at += 1
        while at < len(text) and text[at] != '"':
            if text[at] == "\\":
                at += 1
            out.append(text[at : at + 1])
            at += 1
        if at >= len(text):
            raise ValueError(f'malformed array literal: "{text}"')
        return "".join(out), at + 1
    end = at
    while end < len(text) and text[end] not in ",}":
        end += 1
    raw = text[at:end].strip()
    if not raw or "{" in raw or '"' in raw:
        raise ValueError(f'malformed array literal: "{text}"')
    return (None if raw.upper() == "NULL" else raw.replace("\\", "")), end
