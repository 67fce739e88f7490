"""DuckDB calls made from the caller's own scope, so its replacement scans find what they find
for ``duckdb.connect()``.

DuckDB resolves a table name it does not know from the locals, then the globals, of the first
Python frame outside the ``duckdb`` package, and of that frame only. Called from duckdb-sem's
code, that frame would be ours. :func:`call_in_caller_scope` therefore makes the call from a
frame evaluated with the caller's globals and a copy of its locals: DuckDB then finds the
caller's DataFrames, Arrow objects, relations, numpy arrays and dicts of arrays itself, holds
them as long as its own relations and views do, forgets a deleted variable at the next
statement, and refuses them where ``enable_external_access`` is off, exactly as for a plain
connection. A ``SemRelation`` the SQL names is handed over as its DuckDB relation.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

import duckdb

__all__ = ["HandsOver", "call_in_caller_scope", "caller_frame"]

_OURS = ("duckdb_sem", "duckdb")
#: a name where SQL reads a table: after FROM, JOIN or a comma (a select list's too: harmless)
_READ = re.compile(r"(?:\bFROM|\bJOIN|,)\s*([A-Za-z_][A-Za-z0-9_]*)", re.IGNORECASE)
_FN, _ARGS, _KWARGS = "__duckdb_sem_fn", "__duckdb_sem_args", "__duckdb_sem_kwargs"


class HandsOver:
    """An object DuckDB reads through the DuckDB relation it hands over (a ``SemRelation``):
    a caller's variable of this kind is read as that relation, a subquery for DuckDB."""

    __slots__ = ()

    @property
    def relation(self) -> duckdb.DuckDBPyRelation:
        raise NotImplementedError


def caller_frame() -> FrameType | None:
    """The innermost frame whose code is not duckdb-sem's (nor DuckDB's)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        module = str(frame.f_globals.get("__name__", ""))
        if module not in _OURS and not module.startswith(("duckdb_sem.", "duckdb.")):
            return frame
        frame = frame.f_back
    return None


@functools.lru_cache(maxsize=256)
def _call_code(filename: str, line: int) -> CodeType:
    """The one-line call, placed at the caller's file and line: DuckDB names that place in
    a "not suitable for replacement scans" error."""
    code = compile(f"{_FN}(*{_ARGS}, **{_KWARGS})", filename, "eval")
    return code.replace(co_firstlineno=max(line, 1))


def call_in_caller_scope(
    fn: Callable[..., Any], *args: Any, scan: object = None, **kwargs: Any
) -> Any:
    """``fn(*args, **kwargs)`` called from the scope of the caller of duckdb-sem. ``scan``: the
    statement's text; a :class:`HandsOver` variable it names is read as its relation."""
    frame = caller_frame()
    if frame is None:
        return fn(*args, **kwargs)
    try:
        scope = dict(frame.f_locals)
        global_scope = frame.f_globals
        code = _call_code(frame.f_code.co_filename, frame.f_lineno)
    finally:
        del frame
    if isinstance(scan, str):
        for word in dict.fromkeys(_READ.findall(scan)):
            value = scope[word] if word in scope else global_scope.get(word)
            if isinstance(value, HandsOver):
                scope[word] = value.relation
    scope[_FN], scope[_ARGS], scope[_KWARGS] = fn, args, kwargs
    try:
        return eval(code, global_scope, scope)  # our fixed one-line call, nothing of the user's
    finally:
        scope.clear()  # the caller's objects are not kept by this frame's locals
