"""SQL-level ``PREPARE name AS <semantic statement>`` and ``EXECUTE name(args)``.

DuckDB prepares the statement as written, and its ``{column}`` templates would reach the UDFs
unbound at ``EXECUTE``. So the session keeps the text of each prepared statement that has a
semantic call (DuckDB keeps its own too, for ``DEALLOCATE``), and an ``EXECUTE`` of one runs
that text with the arguments as its ``$n`` parameters: bound, planned and run as the statement
itself would be.

Example:
    ``PREPARE p AS SELECT id FROM r WHERE id > $1 AND sem_filter('{text} is good')`` then
    ``EXECUTE p(0)`` runs the SELECT with ``params=[0]``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["PreparedTexts"]

_NAME = r'(?P<name>"(?:[^"]|"")+"|[A-Za-z_][\w$]*)'
_PREPARE = re.compile(
    rf"^\s*PREPARE\s+{_NAME}\s*(?:\([^)]*\))?\s+AS\s+(?P<body>.+?)\s*;?\s*$", re.I | re.S
)
_EXECUTE = re.compile(rf"^\s*EXECUTE\s+{_NAME}\s*(?:\((?P<args>.*)\))?\s*;?\s*$", re.I | re.S)
_DEALLOCATE = re.compile(rf"^\s*DEALLOCATE\s+(?:PREPARE\s+)?{_NAME}\s*;?\s*$", re.I | re.S)


def _ident(name: str) -> str:
    if len(name) >= 2 and name[0] == name[-1] == '"':
        return name[1:-1].replace('""', '"')
    return name.lower()


class PreparedTexts:
    """The semantic statements of a session's SQL ``PREPARE``, by name."""

    def __init__(self, is_semantic: Callable[[str], bool]) -> None:
        self._is_semantic = is_semantic
        self._texts: dict[str, str] = {}

    def note(self, sql: str) -> str:
        """Remember (or forget) what ``sql`` prepares or deallocates; call it for every
        statement that runs, before DuckDB runs it. Returns what DuckDB runs: a semantic
        ``PREPARE`` without its parameter type list (PostgreSQL's, which DuckDB refuses)."""
        head = sql.lstrip()[:10].lower()
        if head.startswith("prepare") and (match := _PREPARE.match(sql)):
            name = _ident(match["name"])
            if self._is_semantic(match["body"]):
                self._texts[name] = match["body"]
                return f"PREPARE {match['name']} AS {match['body']}"
            self._texts.pop(name, None)
        elif head.startswith("deallocat") and (match := _DEALLOCATE.match(sql)):
            name = _ident(match["name"])
            if name == "all":
                self._texts.clear()
            else:
                self._texts.pop(name, None)
        return sql

    def expand(
        self, sql: str, evaluate: Callable[[str], Sequence[Any]]
    ) -> tuple[str, list[Any]] | None:
        """The statement and parameters an ``EXECUTE`` of a semantic prepared statement runs
        (``evaluate``: the values of the argument list, a SQL expression list); None for
        every other statement."""
        if not self._texts or sql.lstrip()[:7].lower() != "execute":
            return None
        match = _EXECUTE.match(sql)
        if match is None or (text := self._texts.get(_ident(match["name"]))) is None:
            return None
        args = (match["args"] or "").strip()
        return text, list(evaluate(args)) if args else []
