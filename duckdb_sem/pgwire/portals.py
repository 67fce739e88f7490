"""Prepared statements and portals of the extended query protocol.

``Parse`` stores a :class:`Statement` (SQL and the parameter types the client declared);
``Bind`` makes a :class:`Portal` of it with decoded parameter values and result formats; the
portal's :class:`~duckdb_sem.pgwire.results.Result` is made on its first ``Describe`` or
``Execute``. A ``DECLARE``d cursor is a portal with its result already materialised.

Example: ``SELECT * FROM t WHERE id = $2`` takes two parameters (:func:`param_count`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from duckdb_sem.pgwire.lexer import mask_strings, strip_comments
from duckdb_sem.pgwire.results import Result

__all__ = ["Portal", "Statement", "param_count"]


@dataclass(eq=False)
class Statement:
    sql: str
    param_oids: list[int]


@dataclass(eq=False)
class Portal:
    statement: Statement
    params: list[Any]
    formats: list[int] = field(default_factory=list)
    result: Result | None = None
    #: made by a Bind (ends at Sync outside a transaction block), not by ``DECLARE``
    bound: bool = False


def param_count(sql: str) -> int:
    """The highest ``$n`` placeholder in the SQL (0 without any)."""
    masked, _ = mask_strings(strip_comments(sql))  # '$1' in a string is no placeholder
    numbers = [int(n) for n in re.findall(r"\$(\d+)", masked)]
    return max(numbers, default=0)
