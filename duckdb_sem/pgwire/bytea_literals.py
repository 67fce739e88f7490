"""PostgreSQL bytea constants for DuckDB, which reads ``'\\x00ff'`` as its own blob escapes.

PostgreSQL reads a string constant cast to ``bytea`` in its hex format (``'\\x00ff'``: two
bytes) or its escape format (``'a\\000b'``: ``\\ooo`` octal, ``\\\\`` a backslash), and
``decode(text, 'hex' | 'base64' | 'escape')``; DuckDB's ``'\\x00ff'::BLOB`` is three bytes
(``\\x00``, ``f``, ``f``). Each such constant is read here, as PostgreSQL reads it, and written
as ``from_hex('...')`` of its bytes, so the stored bytes are PostgreSQL's and
``octet_length`` sees a BLOB. A constant PostgreSQL would refuse is left for DuckDB to report.

Example:
    ``SELECT '\\x00ff'::bytea`` becomes ``SELECT from_hex('00ff')``.
"""

from __future__ import annotations

import base64
import binascii
import re

from duckdb_sem.pgwire.lexer import constant_value

__all__ = ["pg_bytea", "rewrite_bytea_literals"]

_STR = r"__dsem_str_(?P<n>\d+)__"
_CAST_OP = re.compile(_STR + r"\s*::\s*bytea\b", re.I)
_CAST_CALL = re.compile(r"\bCAST\s*\(\s*" + _STR + r"\s+AS\s+bytea\s*\)", re.I)
_DECODE = re.compile(r"\bdecode\s*\(\s*" + _STR + r"\s*,\s*__dsem_str_(?P<f>\d+)__\s*\)", re.I)
_OCTAL = re.compile(r"\\([0-3][0-7]{2})|\\\\|\\|[^\\]+", re.S)


def pg_bytea(text: str) -> bytes:
    """The bytes PostgreSQL's ``bytea`` input reads from ``text`` (ValueError: it refuses)."""
    if text.startswith("\\x"):
        return bytes.fromhex(text[2:])  # whitespace between pairs allowed, as in PostgreSQL
    out = bytearray()
    for match in _OCTAL.finditer(text):
        piece = match.group(0)
        if match.group(1):
            out.append(int(match.group(1), 8))
        elif piece == "\\\\":
            out.append(0x5C)
        elif piece == "\\":
            raise ValueError("invalid input syntax for type bytea")
        else:
            out += piece.encode()
    return bytes(out)


def _decode(text: str, fmt: str) -> bytes:
    fmt = fmt.lower()
    if fmt == "hex":
        return bytes.fromhex(text)
    if fmt == "base64":
        return base64.b64decode("".join(text.split()), validate=True)
    if fmt == "escape":
        return pg_bytea(text) if not text.startswith("\\x") else text.encode()
    raise ValueError(f"unrecognized encoding: {fmt!r}")


def rewrite_bytea_literals(masked: str, strings: list[str]) -> str:
    """``masked`` (see :func:`~duckdb_sem.pgwire.lexer.mask_strings`) with each bytea constant
    written as ``from_hex`` of PostgreSQL's bytes; new constants are appended to ``strings``."""

    def literal(data: bytes) -> str:
        strings.append("'" + data.hex() + "'")
        return f"from_hex(__dsem_str_{len(strings) - 1}__)"

    def cast(match: re.Match[str]) -> str:
        text = constant_value(strings[int(match["n"])])
        try:
            return match.group(0) if text is None else literal(pg_bytea(text))
        except ValueError:
            return match.group(0)

    def decode(match: re.Match[str]) -> str:
        text, fmt = (
            constant_value(strings[int(match["n"])]),
            constant_value(strings[int(match["f"])]),
        )
        if text is None or fmt is None:
            return match.group(0)
        try:
            return literal(_decode(text, fmt))
        except (ValueError, binascii.Error):
            return match.group(0)

    if "__dsem_str_" not in masked:
        return masked
    masked = _CAST_OP.sub(cast, masked)
    masked = _CAST_CALL.sub(cast, masked)
    return _DECODE.sub(decode, masked)
