"""The one SQL identifier quoter: every name spliced into generated SQL goes through it.

Example:
    >>> print(quote_identifier("r.text"), quote_identifier('a "b" c'))
    "r.text" "a ""b"" c"
    >>> quote_qualified("public", "my table")
    '"public"."my table"'
"""

from __future__ import annotations

__all__ = ["quote_identifier", "quote_qualified"]


def quote_identifier(name: str) -> str:
    """``name`` as one quoted identifier (inner double quotes doubled), whatever it contains."""
    return '"' + name.replace('"', '""') + '"'


def quote_qualified(*parts: str) -> str:
    """``schema.table`` (or any dotted path) with each part quoted on its own."""
    return ".".join(quote_identifier(p) for p in parts)
