"""A seeded generator of semantic statements that fail, for the transaction-state invariant.

Every way a statement can fail, in every statement shape: an output type that does not parse
(in WHERE and in the select list, with and without columns in the template: the leak the
fuzzer found), an unknown column in a template, an unknown model, a backend that keeps
failing, a budget the statement exceeds, a DuckDB error next to the semantic call, and a
DuckDB error met late, while the result is read (after the first SEUs' rows are out).
Shapes: SELECT, CTE, subqueries, UNION, LIMIT, GROUP BY, CREATE TABLE AS, INSERT ... SELECT,
UPDATE and DELETE. Each entry says whether its statement returns rows (read it) and which
session setting it needs first (a budget).

Example: ``failing(seed=1, count=3)`` gives three :class:`Failing` statements, the same three
on every run.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

__all__ = ["SCHEMA", "Failing", "failing"]

#: the tables every run starts from: ``r`` small, ``big`` several SEUs long, ``w`` written
SCHEMA = [
    "CREATE TABLE r AS SELECT * FROM (VALUES (1, 'a good film', 'drama'), (2, 'dull', 'comedy'),"
    " (3, 'good acting', 'drama'), (4, 'bad', NULL)) v(id, text, genre)",
    "CREATE TABLE big AS SELECT range::INTEGER AS id, 'row ' || range || CASE WHEN range % 2 = 0 "
    "THEN ' good' ELSE ' bad' END AS text, 'g' || (range % 3) AS genre FROM range(3000)",
    "CREATE TABLE w AS SELECT id, text AS note FROM r",
    "CREATE TABLE m (k INTEGER)",
]

#: a model whose every call fails (HTTP 500, no retries): a backend error
BROKEN_MODEL = "CREATE MODEL broken USING 'sim:default?fault=500&retries=0'"


@dataclass(frozen=True, slots=True)
class Failing:
    """One statement expected to fail (``setup``: a ``SET`` to run before it, then undone)."""

    sql: str
    why: str
    rows: bool  # it returns rows: read them (a late failure comes while reading)
    setup: str | None = None


#: (why, predicate for WHERE, expression for the select list, setup); ``{t}`` the table
_FAILURES = [
    ("output type, no column", "sem_map('abc', 'x') IS NOT NULL", "sem_map('abc', 'x')", None),
    ("output type, no column", "sem_map('abc', 'INTEGR') > 0", "sem_map('abc', 'INTEGR')", None),
    ("output type", "sem_map('{text} x', 'NOPE') IS NULL", "sem_map('{text} x', 'NOPE')", None),
    ("output type", "sem_map('{text}', 'STRUCT(a') IS NULL", "sem_map('{text}', 'ENUM(')", None),
    ("unknown column", "sem_filter('{nosuch} good')", "sem_map('{nosuch} short')", None),
    ("unknown column", "sem_filter('{text} and {missing}')", "sem_map('{id} {nope}')", None),
    ("unknown model", "sem_filter('{text} good', model := 'nosuch')",
     "sem_map('{text}', model := 'nosuch')", None),
    ("backend error", "sem_filter('{text} good', model := 'broken')",
     "sem_map('{text} short', model := 'broken')", None),
    ("budget", "sem_filter('{text} good')", "sem_map('{text} short')",
     "SET duckdb_sem.max_llm_calls = 1"),
    ("DuckDB error", "sem_filter('{text} good') AND CAST(text AS INTEGER) > 0",
     "sem_map('{text} x') || CAST(text AS INTEGER)", None),
    ("DuckDB error", "sem_filter('{text} good') AND error('boom') IS NULL",
     "CASE WHEN sem_filter('{text} good') THEN error('boom') END", None),
]  # fmt: skip

#: the same failures in the explicit form a plain connection with ``install(con)`` reads
_EXPLICIT = [
    ("output type, no column", "sem_map('abc', 'x') IS NOT NULL", "sem_map('abc', 'x')", None),
    ("template field", "sem_filter('{3} good', text)", "sem_map('{1} short', text)", None),
    ("unbound template", "sem_filter('{text} good')", "sem_map('{text} short')", None),
    ("unknown model", "sem_filter('{0} good', text, model := 'nosuch')",
     "sem_map('{0}', text, model := 'nosuch')", None),
    ("backend error", "sem_filter('{0} good', text, model := 'broken')",
     "sem_map('{0} short', text, model := 'broken')", None),
    ("budget", "sem_filter('{0} good', text)", "sem_map('{0} short', text)",
     "SET duckdb_sem.max_llm_calls = 1"),
    ("DuckDB error", "sem_filter('{0} good', text) AND error('boom') IS NULL",
     "CASE WHEN sem_filter('{0} good', text) THEN error('boom') END", None),
]  # fmt: skip

#: DuckDB errors met only after the first SEUs' rows are out (over ``big``)
_LATE = [
    ("late DuckDB error", "sem_filter('{text} good') AND CASE WHEN id > 2500 THEN "
     "error('late failure') ELSE true END", "CASE WHEN id > 2500 THEN error('late failure') "
     "ELSE sem_map('{text} short') END"),
]  # fmt: skip

#: statement shapes: ``{p}`` a predicate, ``{e}`` an expression, ``{t}`` the table, ``{n}`` a
#: fresh number; (shape, returns rows)
_SHAPES = [
    ("SELECT id FROM {t} WHERE {p}", True),
    ("SELECT id, {e} AS v FROM {t}", True),
    ("SELECT id, {e} AS v FROM {t} ORDER BY id LIMIT 3", True),
    ("WITH c AS (SELECT id, text FROM {t} WHERE {p}) SELECT count(*) FROM c", True),
    ("SELECT count(*) AS n FROM {t} WHERE {p}", True),
    ("SELECT genre, count(*) FROM {t} WHERE {p} GROUP BY genre ORDER BY genre", True),
    ("SELECT id FROM {t} WHERE id IN (SELECT id FROM {t} WHERE {p}) ORDER BY id", True),
    ("SELECT id FROM {t} WHERE {p} UNION ALL SELECT id FROM r", True),
    ("SELECT * FROM (SELECT id, {e} AS v FROM {t}) s WHERE id > 0", True),
    ("CREATE TABLE made_{n} AS SELECT id FROM {t} WHERE {p}", False),
    ("CREATE TABLE made_{n} AS SELECT id, {e} AS v FROM {t}", False),
    ("INSERT INTO w SELECT id, {e} FROM {t}", False),
    ("INSERT INTO w SELECT id, text FROM {t} WHERE {p}", False),
    ("UPDATE w SET note = {e}", False),
    ("DELETE FROM w WHERE {p}", False),
]


def failing(
    *, seed: int, count: int, backend_errors: bool = True, explicit: bool = False
) -> list[Failing]:
    """``count`` failing statements, seeded: every failure kind in every shape first, then
    random picks (``backend_errors``: include the failing model, which its entry must have;
    ``explicit``: the calls in the explicit form, for ``install(con)``)."""
    rng = random.Random(seed)
    kinds = _EXPLICIT if explicit else _FAILURES
    failures = [f for f in kinds if backend_errors or f[0] != "backend error"]
    combos = [(f, s, "r") for f in failures for s in _SHAPES]
    late = [(why, _explicit(p), _explicit(e)) if explicit else (why, p, e) for why, p, e in _LATE]
    combos += [((why, p, e, None), s, "big") for why, p, e in late for s in _SHAPES]
    rng.shuffle(combos)
    numbers = itertools.count(1)
    out: list[Failing] = []
    while len(out) < count:
        for (why, pred, expr, setup), (shape, rows), table in combos:
            if len(out) == count:
                break
            sql = shape.format(p=pred, e=expr, t=table, n=f"{seed}_{next(numbers)}")
            out.append(Failing(sql, why, rows, setup))
        rng.shuffle(combos)
    return out


def _explicit(sql: str) -> str:
    return sql.replace("'{text} good')", "'{0} good', text)").replace(
        "'{text} short')", "'{0} short', text)"
    )
