"""PostgreSQL's lexical rules, for what the server must see in SQL before DuckDB parses it.

A simple-query string may hold several statements, some of them PostgreSQL session commands
DuckDB cannot parse (``SAVEPOINT``, ``DECLARE ... CURSOR``), so it is split here, as psql splits
its input: on semicolons outside string constants (``'...'`` with ``''``, ``E'...'`` with
backslash escapes, ``$tag$...$tag$``), quoted identifiers and comments (``--``, nested
``/* */``). Each piece is then parsed by DuckDB (:mod:`.statements`).

Example:
    ``split_statements("/* a */ SELECT $$a;b$$; SELECT E'it\\'s; x'")`` is
    ``["/* a */ SELECT $$a;b$$", " SELECT E'it\\'s; x'"]``; ``strip_comments`` of the first is
    ``"SELECT $$a;b$$"``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "Token",
    "constant_value",
    "mask_strings",
    "split_statements",
    "strip_comments",
    "tokens",
    "unmask",
]

_DOLLAR = re.compile(r"\$([A-Za-z_\x80-\U0010ffff][\w\x80-\U0010ffff]*)?\$")
Kind = Literal["code", "string", "ident", "comment", "semicolon"]


@dataclass(frozen=True, slots=True)
class Token:
    kind: Kind
    text: str


def _quoted(sql: str, start: int, quote: str, *, backslash: bool) -> int:
    """End (exclusive) of the quoted text opening at ``start``; unterminated: the end of text."""
    i, n = start + 1, len(sql)
    while i < n:
        c = sql[i]
        if backslash and c == "\\":
            i += 2
            continue
        if c == quote:
            if i + 1 < n and sql[i + 1] == quote:
                i += 2
                continue
            return i + 1
        i += 1
    return n


def _block_comment(sql: str, start: int) -> int:
    depth, i, n = 0, start, len(sql)
    while i < n:
        if sql.startswith("/*", i):
            depth += 1
            i += 2
        elif sql.startswith("*/", i):
            depth -= 1
            i += 2
            if depth == 0:
                return i
        else:
            i += 1
    return n


def _word_before(sql: str, i: int) -> bool:
    return i > 0 and (sql[i - 1].isalnum() or sql[i - 1] in "_$")


def tokens(sql: str) -> Iterator[Token]:
    """The text as code, strings, quoted identifiers, comments and top-level semicolons."""
    i, n, code_start = 0, len(sql), 0

    def code(upto: int) -> Iterator[Token]:
        if upto > code_start:
            yield Token("code", sql[code_start:upto])

    while i < n:
        c = sql[i]
        end = -1
        kind: Kind = "string"
        if c == "'":
            escaped = i > 0 and sql[i - 1] in "eE" and not _word_before(sql, i - 1)
            begin = i - 1 if escaped else i
            yield from code(begin)
            end = _quoted(sql, i, "'", backslash=escaped)
            yield Token("string", sql[begin:end])
            i = code_start = end
            continue
        if c == '"':
            end, kind = _quoted(sql, i, '"', backslash=False), "ident"
        elif c == "$" and not _word_before(sql, i) and (match := _DOLLAR.match(sql, i)):
            close = sql.find(match.group(0), match.end())
            end = n if close < 0 else close + len(match.group(0))
        elif sql.startswith("--", i):
            newline = sql.find("\n", i)
            end, kind = (n if newline < 0 else newline), "comment"
        elif sql.startswith("/*", i):
            end, kind = _block_comment(sql, i), "comment"
        elif c == ";":
            end, kind = i + 1, "semicolon"
        if end < 0:
            i += 1
            continue
        yield from code(i)
        yield Token(kind, sql[i:end])
        i = code_start = end
    yield from code(n)


def split_statements(sql: str) -> list[str]:
    """The statements of a simple-query string, without their semicolons (empty ones dropped)."""
    out: list[str] = []
    current: list[str] = []
    for token in tokens(sql):
        if token.kind == "semicolon":
            out.append("".join(current))
            current = []
        else:
            current.append(token.text)
    out.append("".join(current))
    return [s for s in out if strip_comments(s)]


def strip_comments(sql: str) -> str:
    """``sql`` without comments (each becomes a space), trimmed, without a trailing ``;``."""
    text = "".join(" " if t.kind == "comment" else t.text for t in tokens(sql))
    return text.strip().rstrip(";").strip()


def mask_strings(sql: str) -> tuple[str, list[str]]:
    """``sql`` with each string constant replaced by ``__dsem_str_N__``, and the constants.

    Textual rewrites run on the masked text, so they never change a literal (a prompt template
    that mentions ``version()``); :func:`unmask` puts the constants back.
    """
    strings: list[str] = []
    parts: list[str] = []
    for token in tokens(sql):
        if token.kind == "string":
            parts.append(f"__dsem_str_{len(strings)}__")
            strings.append(token.text)
        else:
            parts.append(token.text)
    return "".join(parts), strings


def unmask(sql: str, strings: list[str]) -> str:
    return re.sub(r"__dsem_str_(\d+)__", lambda m: strings[int(m.group(1))], sql)


def constant_value(raw: str) -> str | None:
    """The value of a plain string constant as :func:`mask_strings` keeps it (``'it''s'``:
    ``it's``); None for ``E''`` strings and dollar quotes, which callers leave alone."""
    if len(raw) >= 2 and raw[0] == raw[-1] == "'":
        return raw[1:-1].replace("''", "'")
    return None
