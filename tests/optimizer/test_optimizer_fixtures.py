"""SQL fixtures, in the style of sqlglot's optimizer tests.

Each entry of ``fixtures/*.sql`` (entries are separated by blank lines): ``#`` comment lines
(``# execute: true`` runs it), the query ending with ``;``, then the expected chosen plan as
printed by ``format_plan``. With ``execute``, the written plan, the chosen plan and the
unoptimized UDF path (a connection with ``optimize=False``, where every ``sem_*`` call is a
DuckDB UDF evaluated where SQL puts it) all run and must return the same rows.

The oracle is ``test:?hash=0.5``: a decision is a hash of the rendered column values, never of
the template's words, so about half the rows pass each predicate whatever its wording, and a
filter evaluated on the wrong rows or at the wrong place changes the result.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.optimizer import optimize, plan_query
from duckdb_sem.optimizer.explain import format_plan
from duckdb_sem.plan.build import build_plan
from duckdb_sem.runtime import execute_plan

FIXTURES = Path(__file__).parent / "fixtures"


@dataclass(frozen=True)
class Fixture:
    title: str
    sql: str
    expected: str
    execute: bool
    udf: bool  # "# udf: false": the UDF path cannot run it (e.g. WHERE on a sem_map alias)


def load(name: str) -> list[Fixture]:
    out = []
    for block in (FIXTURES / name).read_text().strip().split("\n\n"):
        lines = block.strip().splitlines()
        comments = [ln[1:].strip() for ln in lines if ln.startswith("#")]
        body = [ln for ln in lines if not ln.startswith("#")]
        end = next(i for i, ln in enumerate(body) if ln.rstrip().endswith(";"))
        sql = " ".join(ln.strip() for ln in body[: end + 1]).rstrip(";")
        execute = any(c.replace(" ", "") == "execute:true" for c in comments)
        udf = not any(c.replace(" ", "") == "udf:false" for c in comments)
        title = comments[0] if comments else sql
        out.append(Fixture(title, sql, "\n".join(body[end + 1 :]), execute, udf))
    return out


CASES = load("choose_plan.sql")


def _connect(*, optimize: bool) -> duckdb_sem.SemConnection:
    c = duckdb_sem.connect(backend=ORACLE, cache="off", optimize=optimize)
    c.duckdb.execute((FIXTURES / "schema.sql").read_text())
    return c


ORACLE = RuleBackend(hash_share=0.5)


@pytest.fixture(scope="module")
def con() -> Iterator[duckdb_sem.SemConnection]:
    c = _connect(optimize=True)
    yield c
    c.close()


@pytest.fixture(scope="module")
def udf_con() -> Iterator[duckdb_sem.SemConnection]:
    """The unoptimized path: every sem_* call a UDF, where the SQL puts it."""
    c = _connect(optimize=False)
    yield c
    c.close()


def rows(table: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(r.values()) for r in table.to_pylist()), key=repr)


@pytest.mark.parametrize("case", CASES, ids=[c.title[:60] for c in CASES])
def test_fixture(
    con: duckdb_sem.SemConnection, udf_con: duckdb_sem.SemConnection, case: Fixture
) -> None:
    chosen = plan_query(con, case.sql)
    assert format_plan(chosen.root) == case.expected
    if not case.execute:
        return
    engine = con.session.engine
    written = build_plan(case.sql, lambda t: con.duckdb.sql(f"SELECT * FROM {t} LIMIT 0").columns)
    optimized = execute_plan(con, chosen, engine, con.session.new_query())
    assert rows(execute_plan(con, written, engine, con.session.new_query())) == rows(optimized)
    if not case.udf:
        return
    udf = udf_con.sql(case.sql).fetchall()
    assert sorted(udf, key=repr) == rows(optimized)
    if "ORDER BY" in case.sql:
        assert [tuple(r.values()) for r in optimized.to_pylist()] == udf


def test_every_enumerated_plan_of_every_fixture_agrees(con: duckdb_sem.SemConnection) -> None:
    for case in CASES:
        choice, _ = optimize(con, case.sql)
        results = {
            repr(rows(execute_plan(con, r.plan, con.session.engine, con.session.new_query())))
            for r in choice.ranked
        }
        assert len(results) == 1, case.title


def test_the_oracle_answers_from_values_not_template_words(
    con: duckdb_sem.SemConnection,
) -> None:
    """Each executed predicate keeps some rows and drops others: none is constant."""
    for sql in (
        "SELECT count(*) FROM reviews WHERE sem_filter('{text} is great')",
        "SELECT count(*) FROM reviews WHERE sem_filter('{text} is good')",
    ):
        ((kept,),) = con.sql(sql).fetchall()
        ((total,),) = con.sql("SELECT count(*) FROM reviews").fetchall()
        assert 0 < kept < total, sql
