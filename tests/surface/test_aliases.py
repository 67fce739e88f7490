"""Other systems' function names (ai_filter, llm_complete, ai_agg, ...) on every entry."""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import pytest

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.surface.aliases import ALIASES, normalize_aliases

ROWS = "SELECT * FROM (VALUES (1, 'good film', 'a'), (2, 'bad film', 'a'), (3, 'good fun', 'b')) t(id, text, g)"


@pytest.fixture(params=[True, False], ids=["planned", "udf"])
def con(request: pytest.FixtureRequest) -> Iterator[duckdb_sem.SemConnection]:
    c = duckdb_sem.connect(backend=RuleBackend(yes_if=["good"]), cache="off",
                           optimize=request.param)  # fmt: skip
    c.execute("CREATE TABLE r AS " + ROWS)
    yield c
    c.close()


@pytest.mark.parametrize("alias", [a for a, n in ALIASES.items() if n == "sem_filter"])
def test_filter_aliases_answer_as_sem_filter(con: duckdb_sem.SemConnection, alias: str) -> None:
    q = "SELECT id FROM r WHERE {}('Is it? {{text}}') ORDER BY id"
    assert con.sql(q.format(alias.upper())).fetchall() == [(1,), (3,)]
    assert con.sql(q.format(alias)).fetchall() == con.sql(q.format("sem_filter")).fetchall()


@pytest.mark.parametrize("alias", [a for a, n in ALIASES.items() if n == "sem_map"])
def test_map_aliases_answer_as_sem_map(con: duckdb_sem.SemConnection, alias: str) -> None:
    q = "SELECT id, {}('Gist: {{text}}') AS x FROM r ORDER BY id"
    assert con.sql(q.format(alias)).fetchall() == con.sql(q.format("sem_map")).fetchall()
    typed = f"SELECT {alias}('Length of {{text}}', 'INTEGER') AS n FROM r ORDER BY id"
    assert all(isinstance(v, int) for (v,) in con.sql(typed).fetchall())


@pytest.mark.parametrize("alias", [a for a, n in ALIASES.items() if n == "sem_agg"])
def test_agg_aliases_answer_as_sem_agg(con: duckdb_sem.SemConnection, alias: str) -> None:
    q = "SELECT g, {}('Sum up {{text}}') AS s FROM r GROUP BY g ORDER BY g"
    assert con.sql(q.format(alias)).fetchall() == con.sql(q.format("sem_agg")).fetchall()


def test_explain_semantic_reads_an_alias() -> None:
    c = duckdb_sem.connect(backend=RuleBackend(yes_if=["good"]), cache="off")
    c.execute("CREATE TABLE r AS " + ROWS)
    rows = [
        r[0]
        for r in c.sql("EXPLAIN SEMANTIC SELECT id FROM r WHERE llm_filter('Q {text}')").fetchall()
    ]
    assert any("SemFilter sem_filter('Q {0}', r.text)" in row for row in rows)
    assert "SemFilter" in c.explain_semantic("SELECT id FROM r WHERE ai_if('Q {text}')")
    c.close()


def test_install_registers_the_aliases_in_a_plain_duckdb_connection() -> None:
    db = duckdb.connect()
    duckdb_sem.install(db, backend=RuleBackend(yes_if=["good"]), cache="off")
    db.execute("CREATE TABLE r AS " + ROWS)
    got = db.sql("SELECT id, llm_complete('Gist {0}', text) FROM r WHERE ai_filter('Q {0}', text) "
                 "ORDER BY id").fetchall()  # fmt: skip
    assert got == [(1, "Gist good film"), (3, "Gist good fun")]
    assert (
        db.sql("SELECT g, ai_agg('Sum {0}', text) FROM r GROUP BY g ORDER BY g").fetchall()[1][0]
        == "b"
    )
    db.close()


def test_only_calls_are_renamed() -> None:
    sql = (
        "SELECT 'ai_filter(x)' AS s, \"ai_filter\"(1), t.ai_agg, llm_reduce ( '{a}' ) FROM t "
        "-- ai_if(\nWHERE Ai_If('{b}')"
    )
    assert normalize_aliases(sql) == (
        "SELECT 'ai_filter(x)' AS s, \"ai_filter\"(1), t.ai_agg, sem_agg ( '{a}' ) FROM t "
        "-- ai_if(\nWHERE sem_filter('{b}')"
    )
    assert normalize_aliases("EXPLAIN SEMANTIC SELECT ai_complete('{x}') FROM t") == (
        "EXPLAIN SEMANTIC SELECT sem_map('{x}') FROM t"
    )
    assert normalize_aliases("SELECT 1") == "SELECT 1"
