"""Every statement kind that holds a semantic SELECT is planned, gives DuckDB's rows, and stops
its LLM work at a LIMIT.

The backend is ``test:?yes_if=good``: a decision is yes when the row's *text* says "good" (no
template here holds the word), so plain DuckDB computes the same answer with
``text LIKE '%good%'``: each test compares the planned result with that oracle and counts the
backend calls. The table has 20,000 rows, every other one "good", so a ``LIMIT 5`` that runs
row by row needs about 10 calls and one that runs on DuckDB's UDF vectors 2,048.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

import duckdb_sem

ROWS = 20_000
GOOD = "sem_filter('{text} is positive')"
PLAIN = "text LIKE '%good%'"


@pytest.fixture(scope="module")
def con() -> Iterator[duckdb_sem.SemConnection]:
    c = duckdb_sem.connect(backend="test:?yes_if=good", cache="off")
    c.execute(
        "CREATE TABLE r AS SELECT i AS id, CASE WHEN i % 2 = 0 THEN 'good ' ELSE 'bad ' END "
        f"|| i AS text FROM range({ROWS}) t(i)"
    )
    c.execute("CREATE TABLE m AS SELECT i AS mid, CASE WHEN i % 3 = 0 THEN 'good' ELSE 'bad' END "
              "|| ' film ' || i AS title FROM range(6) t(i)")  # fmt: skip
    yield c
    c.close()


def planned(con: duckdb_sem.SemConnection, sql: str) -> list[str]:
    lines = con.explain_semantic(sql).splitlines()
    assert any(line.startswith("road: planned by the optimizer") for line in lines), lines
    return lines


def plain(con: duckdb_sem.SemConnection, sql: str) -> list[tuple[object, ...]]:
    rows: list[tuple[object, ...]] = con.duckdb.sql(sql).fetchall()
    return rows


def calls(con: duckdb_sem.SemConnection) -> int:
    return con.stats().physical_calls


# -- LIMIT reaches through what BI tools and pipelines wrap queries in -----------------------
@pytest.mark.parametrize(
    "sql",
    [
        f"WITH c AS (SELECT id FROM r WHERE {GOOD}) SELECT * FROM c LIMIT 5",
        f"WITH c AS (SELECT id FROM r WHERE {GOOD}) SELECT id FROM c ORDER BY id LIMIT 5",
        f"SELECT * FROM (SELECT id FROM r WHERE {GOOD}) LIMIT 5",
        f"SELECT * FROM (SELECT id FROM r WHERE {GOOD}) AS src LIMIT 5",
        f"SELECT * FROM (SELECT * FROM (SELECT id FROM r WHERE {GOOD}) AS a) LIMIT 5",
        f"SELECT id FROM (SELECT id, text FROM r) AS s WHERE {GOOD} LIMIT 5",
    ],
    ids=["cte", "cte-order", "wrapper", "wrapper-alias", "two-wrappers", "derived"],
)
def test_a_limit_through_a_wrapper_stops_the_llm_work(
    con: duckdb_sem.SemConnection, sql: str
) -> None:
    planned(con, sql)
    got = con.sql(sql).fetchall()
    assert got == [(0,), (2,), (4,), (6,), (8,)]
    assert calls(con) <= 64  # the UDF path: 2,048


def test_bi_style_limit_200_stops_too(con: duckdb_sem.SemConnection) -> None:
    sql = f"SELECT * FROM (SELECT id, text FROM r WHERE {GOOD}) LIMIT 200"
    planned(con, sql)
    got = con.sql(sql).fetchall()
    assert got == plain(con, f"SELECT id, text FROM r WHERE {PLAIN} LIMIT 200")
    assert 400 <= calls(con) < 1000  # 200 rows at selectivity 1/2, never all 20,000


def test_a_cte_read_twice_is_computed_once(con: duckdb_sem.SemConnection) -> None:
    sql = (
        f"WITH c AS (SELECT id FROM r WHERE id < 300 AND {GOOD}) "
        "SELECT (SELECT count(*) FROM c), (SELECT max(id) FROM c)"
    )
    lines = planned(con, sql)
    assert any("computed once (read 2 times)" in line for line in lines)
    assert con.sql(sql).fetchall() == [(150, 298)]
    assert calls(con) == 300  # each row asked once, not once per reference


def test_run_to_end_reads_a_planned_result_to_its_last_row(con: duckdb_sem.SemConnection) -> None:
    """What EXPLAIN ANALYZE and a dry run use: every SEU runs, not only the first."""
    con.run_to_end(f"SELECT id FROM r WHERE id < 3000 AND {GOOD}")
    assert calls(con) == 3000
    lines = con.explain_semantic(f"SELECT id FROM r WHERE id < 1000 AND {GOOD}", analyze=True)
    assert "calls≈" in lines and con.stats().physical_calls == 1000


# -- writes --------------------------------------------------------------------------------
def test_create_table_as_with_limit(con: duckdb_sem.SemConnection) -> None:
    sql = f"CREATE OR REPLACE TABLE hits AS SELECT id, text FROM r WHERE {GOOD} LIMIT 5"
    lines = planned(con, sql)
    assert any(line.startswith("its rows are written batch by batch") for line in lines)
    written = "SELECT count(*) FROM information_schema.tables WHERE table_name = 'hits'"
    assert plain(con, written) == [(0,)]  # EXPLAIN wrote nothing
    assert con.execute(sql).fetchall() == [(5,)]
    assert calls(con) <= 64
    assert plain(con, "SELECT id FROM hits ORDER BY id") == [(0,), (2,), (4,), (6,), (8,)]
    assert plain(con, "SELECT typeof(id), typeof(text) FROM hits LIMIT 1") == [
        ("BIGINT", "VARCHAR")
    ]


def test_create_table_if_not_exists_leaves_an_existing_table(
    con: duckdb_sem.SemConnection,
) -> None:
    con.execute("CREATE OR REPLACE TABLE kept AS SELECT 42 AS id, 'x' AS text")
    con.execute(f"CREATE TABLE IF NOT EXISTS kept AS SELECT id, text FROM r WHERE {GOOD} LIMIT 5")
    assert plain(con, "SELECT id FROM kept") == [(42,)]


def test_insert_select_update_and_delete(con: duckdb_sem.SemConnection) -> None:
    con.execute("CREATE OR REPLACE TABLE t (id BIGINT, text VARCHAR, g VARCHAR)")
    sql = f"INSERT INTO t (id, text) SELECT id, text FROM r WHERE id < 40 AND {GOOD}"
    planned(con, sql)
    assert con.execute(sql).fetchall() == [(20,)]
    assert calls(con) == 40
    upd = "UPDATE t SET g = sem_map('{text} in short') WHERE id < 10"
    planned(con, upd)
    assert con.execute(upd).fetchall() == [(5,)]
    assert calls(con) == 5
    assert plain(con, "SELECT id, g FROM t WHERE g IS NOT NULL ORDER BY id") == [
        (i, f"good {i} in short") for i in range(0, 10, 2)
    ]
    assert plain(con, "SELECT count(*) FROM t WHERE g IS NULL") == [(15,)]
    con.execute("UPDATE t SET text = 'bad now' WHERE id >= 30")
    delete = f"DELETE FROM t WHERE {GOOD}"
    planned(con, delete)
    assert con.execute(delete).fetchall() == [(15,)]
    assert plain(con, "SELECT id FROM t ORDER BY id") == [(30,), (32,), (34,), (36,), (38,)]


def test_insert_into_the_table_it_reads_never_reads_its_own_rows(
    con: duckdb_sem.SemConnection,
) -> None:
    con.execute("CREATE OR REPLACE TABLE s AS SELECT * FROM r WHERE id < 10")
    assert con.execute(f"INSERT INTO s SELECT id + 100, text FROM s WHERE {GOOD}").fetchall() == [
        (5,)
    ]
    assert plain(con, "SELECT count(*) FROM s") == [(15,)]


# -- views, subqueries, set operations ------------------------------------------------------
def test_a_semantic_view_is_planned_with_the_query_reading_it(
    con: duckdb_sem.SemConnection,
) -> None:
    con.execute(f"CREATE OR REPLACE VIEW good_r AS SELECT id, text FROM r WHERE {GOOD}")
    sql = "SELECT id FROM good_r LIMIT 5"
    lines = planned(con, sql)
    assert any("view good_r read as its definition" in line for line in lines)
    assert con.sql(sql).fetchall() == [(0,), (2,), (4,), (6,), (8,)]
    assert calls(con) <= 64


def test_in_and_scalar_subqueries(con: duckdb_sem.SemConnection) -> None:
    sql = f"SELECT count(*) FROM r WHERE id < 50 AND id IN (SELECT id FROM r WHERE id < 100 AND {GOOD})"
    planned(con, sql)
    assert con.sql(sql).fetchall() == [(25,)]
    assert calls(con) == 100
    scalar = "SELECT (SELECT sem_map('{text} gist') FROM r WHERE id = 4) AS g"
    planned(con, scalar)
    assert con.sql(scalar).fetchall() == [("good 4 gist",)]
    assert calls(con) == 1


def test_union_all_pushes_its_limit_into_each_branch(con: duckdb_sem.SemConnection) -> None:
    sql = (
        f"SELECT id FROM r WHERE {GOOD} UNION ALL "
        f"SELECT id FROM r WHERE id < 1000 AND NOT {GOOD} LIMIT 10"
    )
    planned(con, sql)
    got = con.sql(sql).fetchall()
    assert len(got) == 10 and set(got) <= {(i,) for i in range(ROWS)}
    assert calls(con) <= 2 * 64
    union = f"SELECT id FROM r WHERE id < 6 AND {GOOD} UNION SELECT mid FROM m"
    planned(con, union)
    assert sorted(con.sql(union).fetchall()) == [(i,) for i in range(6)]


def test_a_correlated_subquery_says_why_it_is_not_planned(con: duckdb_sem.SemConnection) -> None:
    sql = (
        "SELECT mid FROM m WHERE EXISTS (SELECT 1 FROM r WHERE r.id = m.mid AND "
        "sem_filter('{r.text} is positive'))"
    )
    text = con.explain_semantic(sql)
    assert text.startswith("not planned by the optimizer: ") and "correlated" in text
    assert sorted(con.sql(sql).fetchall()) == [(0,), (2,), (4,)]


# -- sources: files, table functions --------------------------------------------------------
def test_file_and_table_function_scans(con: duckdb_sem.SemConnection, tmp_path: Path) -> None:
    path = tmp_path / "reviews.csv"
    duckdb.sql("SELECT * FROM (VALUES (1, 'good a'), (2, 'bad b'), (3, 'good c')) t(id, text)"
               ).write_csv(str(path))  # fmt: skip
    for source in (f"'{path}'", f"read_csv('{path}')", f"'{path}' AS f"):
        sql = f"SELECT id, {GOOD} AS p FROM {source} ORDER BY id"
        planned(con, sql)
        assert con.sql(sql).fetchall() == [(1, True), (2, False), (3, True)]
    qualified = f"SELECT id FROM '{path}' WHERE sem_filter('{{reviews.text}} is positive')"
    assert sorted(con.sql(qualified).fetchall()) == [(1,), (3,)]  # DuckDB's alias: the stem
    ranged = "SELECT x FROM range(10) a(x) WHERE sem_filter('{a.x} is even') AND x < 3"
    planned(con, ranged)
    assert con.sql(ranged).fetchall() == []  # no row says good


# -- semantic calls inside expressions -------------------------------------------------------
def test_semantic_calls_inside_expressions(con: duckdb_sem.SemConnection) -> None:
    case = (
        f"SELECT id, CASE WHEN {GOOD} THEN 'pos' ELSE 'neg' END AS v FROM r "
        "WHERE id < 4 ORDER BY id"
    )
    planned(con, case)
    assert con.sql(case).fetchall() == [(0, "pos"), (1, "neg"), (2, "pos"), (3, "neg")]
    either = f"SELECT id FROM r WHERE id < 6 AND ({GOOD} OR id = 1) ORDER BY id"
    planned(con, either)
    assert con.sql(either).fetchall() == [(0,), (1,), (2,), (4,)]
    negated = f"SELECT count(*) FROM r WHERE id < 100 AND NOT {GOOD}"
    planned(con, negated)
    assert con.sql(negated).fetchall() == [(50,)]
    labels = "['good', 'bad']"
    pair = (
        f"SELECT r.id, m.mid FROM r JOIN m ON sem_classify('{{r.text}} kind', {labels}) = "
        f"sem_classify('{{m.title}} kind', {labels}) WHERE r.id < 4 ORDER BY 1, 2"
    )
    planned(con, pair)
    oracle = plain(
        con,
        "SELECT r.id, m.mid FROM r JOIN m ON (r.text LIKE '%good%') = (m.title LIKE '%good%') "
        "WHERE r.id < 4 ORDER BY 1, 2",
    )
    assert con.sql(pair).fetchall() == oracle
    assert calls(con) <= 4 + 6  # each row of each side classified once, not once per pair
    grouped = f"SELECT sem_classify('{{text}} kind', {labels}) AS k, count(*) FROM r WHERE id < 10 GROUP BY k ORDER BY k"
    planned(con, grouped)
    assert con.sql(grouped).fetchall() == [("bad", 5), ("good", 5)]
    coalesced = "SELECT coalesce(sem_map('{text} x'), 'none') FROM r WHERE id = 2"
    planned(con, coalesced)
    assert con.sql(coalesced).fetchall() == [("good 2 x",)]
    # asked only for the rows that reach the branch: run as written, never dearer than that
    branch = "SELECT CASE WHEN id = 2 THEN sem_map('{text} x') END FROM r WHERE id < 100"
    assert "CASE/IF/COALESCE branch" in con.explain_semantic(branch).splitlines()[0]
    assert sorted(con.sql(branch).fetchall(), key=str)[0] == ("good 2 x",)
    assert calls(con) == 1


# -- the relation API composes with all of it -------------------------------------------------
def test_relation_api_over_a_planned_cte(con: duckdb_sem.SemConnection) -> None:
    rel = con.sql(f"WITH c AS (SELECT id, text FROM r WHERE {GOOD}) SELECT * FROM c")
    assert rel.limit(3).fetchall() == [(0, "good 0"), (2, "good 2"), (4, "good 4")]
    assert calls(con) <= 64
    mapped = rel.filter("id < 6").sem_map("{text} brief", name="b")
    assert mapped.fetchall() == [(0, "good 0", "good 0 brief"), (2, "good 2", "good 2 brief"),
                                 (4, "good 4", "good 4 brief")]  # fmt: skip
