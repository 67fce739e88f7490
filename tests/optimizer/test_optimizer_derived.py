"""Derived tables through the optimizer and the runtime: the same rows as the flat query,
the same plan space, and a static run that keeps the order the SQL wrote."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.optimizer import optimize
from duckdb_sem.optimizer.choose import plan_key
from duckdb_sem.plan.build import build_plan
from duckdb_sem.plan.nodes import Node
from duckdb_sem.runtime import RuntimeOptions, execute_plan

SCHEMA = Path(__file__).parent / "fixtures" / "schema.sql"

# (flat SQL, the same query with an operator written in a derived table)
PAIRS = [
    (
        "SELECT r.id, m.title FROM reviews r JOIN movies m ON r.movie_id = m.id "
        "WHERE m.year > 2005 AND sem_filter('{r.text} is positive')",
        "SELECT r.id, m.title FROM (SELECT id, movie_id, text FROM reviews "
        "WHERE sem_filter('{text} is positive')) AS r JOIN movies m ON r.movie_id = m.id "
        "WHERE m.year > 2005",
    ),
    (
        "SELECT r.id, m.title FROM reviews r JOIN movies m "
        "ON sem_join('{r.text} is about {m.title}') "
        "WHERE r.id < 40 AND m.id < 6 AND sem_filter('{m.title} has a great cast')",
        "SELECT r.id, m.title FROM reviews r JOIN (SELECT id, title FROM movies "
        "WHERE id < 6 AND sem_filter('{title} has a great cast')) m "
        "ON sem_join('{r.text} is about {m.title}') WHERE r.id < 40",
    ),
    (
        "SELECT id, sem_map('{text} in three words') AS gist FROM reviews "
        "WHERE stars > 2 AND sem_filter('{text} good')",
        "SELECT id, gist FROM (SELECT id, stars AS s, text AS body, "
        "sem_map('{text} in three words') AS gist FROM reviews) AS reviews "
        "WHERE s > 2 AND sem_filter('{body} good')",
    ),
]


@pytest.fixture
def backend() -> RuleBackend:
    return RuleBackend(yes_if=["good", "great"])


@pytest.fixture
def con(backend: RuleBackend) -> Iterator[duckdb_sem.SemConnection]:
    c = duckdb_sem.connect(backend=backend, cache="off")
    c.duckdb.execute(SCHEMA.read_text())
    yield c
    c.close()


def written(con: duckdb_sem.SemConnection, sql: str) -> Node:
    return build_plan(sql, lambda t: con.duckdb.sql(f"SELECT * FROM {t} LIMIT 0").columns)


def rows(result: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(result, key=repr)


@pytest.mark.parametrize(("flat", "derived"), PAIRS)
def test_same_rows_and_plans_as_the_flat_query(
    con: duckdb_sem.SemConnection, flat: str, derived: str
) -> None:
    expected = rows(con.sql(flat).fetchall())
    assert expected
    assert rows(con.sql(derived).fetchall()) == expected
    con.optimize = False  # the UDF path, as written
    assert rows(con.sql(derived).fetchall()) == expected
    con.optimize = True
    choice, _ = optimize(con, derived)
    flat_choice, _ = optimize(con, flat)
    assert choice.total == flat_choice.total
    assert {plan_key(r.plan) for r in choice.ranked} == {
        plan_key(r.plan) for r in flat_choice.ranked
    }
    assert plan_key(written(con, derived)) in {plan_key(r.plan) for r in choice.ranked}
    for ranked in choice.ranked:
        got = execute_plan(con, ranked.plan, con.session.engine, con.session.new_query())
        assert rows([tuple(r.values()) for r in got.to_pylist()]) == expected


def test_explain_shows_the_filter_of_a_derived_table_below_the_join(
    con: duckdb_sem.SemConnection,
) -> None:
    derived = (
        "SELECT r.id, m.title FROM (SELECT id, movie_id, text FROM reviews "
        "WHERE sem_filter('{text} is positive')) AS r JOIN movies m ON r.movie_id = m.id"
    )
    lines = [row[0] for row in con.sql("EXPLAIN SEMANTIC " + derived).fetchall()]
    assert lines[0] == "2 equivalent plans"
    tree = [re.sub(r"\s{2,}rows≈.*", "", ln) for ln in lines[2:6]]
    assert tree == [
        'Project "r.id" AS id, "m.title" AS title',
        '└─ Join ON ("r.movie_id" = "m.id")',
        "   ├─ SemFilter sem_filter('{0} is positive', r.text)",
        "   │  └─ Scan reviews AS r",
    ]


def test_static_runs_the_derived_plan_as_written(
    con: duckdb_sem.SemConnection, backend: RuleBackend
) -> None:
    flat, derived = PAIRS[0]
    expected = rows(con.sql(flat).fetchall())
    chosen_calls = backend.calls
    assert chosen_calls == 60  # the optimizer filters the 60 reviews the join keeps

    plan = written(con, derived)
    con.runtime = RuntimeOptions(mode="static", plan=plan)
    before = backend.calls
    assert rows(con.sql(derived).fetchall()) == expected
    assert backend.calls - before == 300  # as written: every review, below the join
    run = con.session.query.run
    assert run.progress().plan == plan_key(plan.children[0])
