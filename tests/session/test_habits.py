"""DuckDB habits on a duckdb-sem connection: relation methods with semantic calls, statements
with nothing to run or that do not parse, and no internal name left in the catalog."""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import pandas as pd
import pytest

import duckdb_sem
from duckdb_sem.errors import BindError


@pytest.fixture
def con() -> Iterator[duckdb_sem.SemConnection]:
    c = duckdb_sem.connect(backend="test:?yes_if=good", cache="off")
    c.execute("CREATE TABLE r AS SELECT i AS id, CASE WHEN i % 2 = 0 THEN 'good ' ELSE 'bad ' "
              "END || i AS text, i % 3 AS g FROM range(6) t(i)")  # fmt: skip
    yield c
    c.close()


def test_semantic_calls_in_project_aggregate_order_and_filter(
    con: duckdb_sem.SemConnection,
) -> None:
    rel = con.table("r")
    assert rel.project("id, sem_map('{text} in 3 words') AS w").limit(2).fetchall() == [
        (0, "good 0 in 3 words"),
        (1, "bad 1 in 3 words"),
    ]
    assert con.sql("SELECT * FROM r").select("sem_filter('{text} is fine') AS ok").fetchall() == [
        (True,), (False,), (True,), (False,), (True,), (False,)
    ]  # fmt: skip
    grouped = rel.aggregate("g, count(*) FILTER (WHERE sem_filter('{text} is fine')) AS n", "g")
    assert sorted(grouped.fetchall()) == [(0, 1), (1, 1), (2, 1)]
    ordered = rel.order("sem_filter('{text} is fine') DESC, id").limit(3)
    assert [row[0] for row in ordered.fetchall()] == [0, 2, 4]
    assert rel.filter("sem_filter('{text} is fine') AND id > 1").project("id").fetchall() == [
        (2,), (4,)
    ]  # fmt: skip
    assert rel.project("id + 1 AS k").limit(1).fetchall() == [(1,)]  # DuckDB's own, unchanged


@pytest.mark.parametrize("sql", ["", ";", "  ", "-- only a comment"])
def test_a_statement_with_nothing_to_run_says_so(con: duckdb_sem.SemConnection, sql: str) -> None:
    with pytest.raises(BindError, match="nothing to run"):
        con.sql(sql)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT sem_map('{text} x FROM r",
        "SELECT sem_map('{text}') FROM r WHERE text = 'unterminated",
        "SELECT sem_filter('{text} x' FROM r",
    ],
)
def test_malformed_semantic_sql_gets_duckdb_s_parser_error(
    con: duckdb_sem.SemConnection, sql: str
) -> None:
    with pytest.raises((duckdb.ParserException, BindError)):
        con.sql(sql)
    with pytest.raises((duckdb.ParserException, BindError)):
        con.execute(sql)
    assert con.sql("SELECT count(*) FROM r").fetchall() == [(6,)]  # the connection goes on


def test_no_internal_name_is_left_in_the_catalog(con: duckdb_sem.SemConnection) -> None:
    notes = pd.DataFrame({"note": ["good refund", "bad thanks"]})  # noqa: F841 - read by name
    planned = con.sql("SELECT * FROM notes WHERE sem_filter('{note} asks for money back')")
    topk = con.sql("SELECT * FROM sem_topk('r', 2, '{text} best') WHERE sem_filter('{text} ok')")
    joined = con.sql("SELECT * FROM sem_join('r', 'r', '{l.text} likes {r.text}') LIMIT 1")
    units = con.sql("SELECT id FROM r WHERE id IN (SELECT id FROM r WHERE sem_filter('{text} ok'))")

    def catalog() -> set[str]:
        names = {row[0] for row in con.sql("SHOW TABLES").fetchall()}
        names |= {row[0] for row in con.sql("SELECT table_name FROM information_schema.tables"
                                            ).fetchall()}  # fmt: skip
        return names

    assert catalog() == {"r"}
    assert planned.fetchall() == [("good refund",)]
    assert len(topk.fetchall()) == 2 and len(joined.fetchall()) == 1
    assert sorted(units.fetchall()) == [(0,), (2,), (4,)]
    con.execute("SELECT id, sem_map('{text} x') FROM r WHERE id IN "
                "(SELECT id FROM r WHERE sem_filter('{text} ok'))").fetchall()  # fmt: skip
    assert catalog() == {"r"}
