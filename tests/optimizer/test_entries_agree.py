"""Every executed optimizer fixture gives the same rows through every way in.

The entries: ``duckdb_sem.install(con)`` on a plain DuckDB connection (the UDFs in the explicit
positional form, DuckDB drives), ``connect()`` planned by the adaptive SEU loop (the default),
the same with a static plan, and the statement wrapped by the relation API's ``.limit()``
(merged into its SELECT, so still planned). The oracle is ``test:?hash=0.5`` (a hash of the
rendered column values): rendering a value differently on one road, or evaluating a predicate
on the wrong rows, changes the rows that road returns.
"""

from __future__ import annotations

import re
from typing import Any

import duckdb
import pytest
from test_optimizer_fixtures import CASES, FIXTURES

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.runtime import RuntimeOptions
from duckdb_sem.surface.bind import bind_sql

EXECUTED = [c for c in CASES if c.execute and c.udf]


AGG_ALIAS = re.compile(r"sem_agg\('(?:[^']|'')*'\)\s+AS\s+(\w+)", re.IGNORECASE)


def ordered(rows: list[tuple[Any, ...]], sql: str, names: list[str]) -> list[tuple[Any, ...]]:
    """Rows in the query's order (sorted when it has none), without ``sem_agg`` outputs: a
    group's ``list()`` has no defined order in SQL, so the text a group folds into may differ
    between runs; that every group got an answer is checked instead."""
    aggs = {a.lower() for a in AGG_ALIAS.findall(sql)}
    keep = [i for i, n in enumerate(names) if n.lower() not in aggs]
    for row in rows:
        assert all(row[i] is not None for i in range(len(names)) if i not in keep)
    out = [tuple(row[i] for i in keep) for row in rows]
    return out if "ORDER BY" in sql.upper() else sorted(out, key=repr)


@pytest.mark.parametrize("case", EXECUTED, ids=[c.title[:60] for c in EXECUTED])
def test_every_entry_returns_the_same_rows(case: Any) -> None:
    oracle = RuleBackend(hash_share=0.5)
    schema = (FIXTURES / "schema.sql").read_text()

    adaptive = duckdb_sem.connect(backend=oracle, cache="off")
    adaptive.duckdb.execute(schema)
    names = adaptive.sql(case.sql).columns
    expected = ordered(adaptive.sql(case.sql).fetchall(), case.sql, names)
    explicit = bind_sql(case.sql, adaptive.describe).sql  # the {col} fields bound to positions

    static = duckdb_sem.connect(backend=oracle, cache="off")
    static.duckdb.execute(schema)
    static.runtime = RuntimeOptions(mode="static")
    assert ordered(static.sql(case.sql).fetchall(), case.sql, names) == expected, "static plan"

    plain = duckdb.connect()
    plain.execute(schema)
    duckdb_sem.install(plain, backend=oracle, cache="off")
    assert ordered(plain.sql(explicit).fetchall(), case.sql, names) == expected, "install()"

    limited = adaptive.sql(case.sql).limit(1_000_000).fetchall()
    assert ordered(limited, case.sql, names) == expected, "relation .limit()"
    assert len(expected) > 0 or "count" in case.sql.lower()
    for c in (adaptive, static):
        c.close()
    plain.close()
