"""LIMIT stops LLM work, and nothing runs before a fetch: through ``con.sql()`` and relations.

The oracle (``test:?hash=0.5``) answers from a hash of the rendered column values, so about
half the rows pass and which ones does not depend on the template's words. Every count below
is of requests the backend really answered (``RuleBackend.calls``, the cache off), and every
row set is checked against the same query without the LIMIT.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.session.relation import with_limit

ROWS = 20_000
FILTER = "sem_filter('Is this interesting? {txt}')"


@pytest.fixture
def oracle() -> RuleBackend:
    return RuleBackend(hash_share=0.5)


@pytest.fixture
def big(oracle: RuleBackend) -> Iterator[duckdb_sem.SemConnection]:
    con = duckdb_sem.connect(backend=oracle, cache="off")
    con.execute(f"CREATE TABLE t AS SELECT range AS id, 'row ' || range AS txt FROM range({ROWS})")
    yield con
    con.close()


def full(con: duckdb_sem.SemConnection, sql: str) -> list[tuple[object, ...]]:
    return con.sql(sql).fetchall()


def test_filter_limit_5_over_20000_rows_makes_at_most_64_calls(
    big: duckdb_sem.SemConnection, oracle: RuleBackend
) -> None:
    rows = big.sql(f"SELECT id FROM t WHERE {FILTER} LIMIT 5").fetchall()
    calls = oracle.calls
    assert len(rows) == 5
    assert calls <= 64, calls
    everything = set(full(big, f"SELECT id FROM t WHERE {FILTER}"))
    assert oracle.calls - calls == ROWS  # the unlimited query asks every row
    assert set(rows) <= everything and len(everything) > 9_000


def test_offset_is_skipped_and_counted(big: duckdb_sem.SemConnection, oracle: RuleBackend) -> None:
    rows = big.sql(f"SELECT id FROM t WHERE {FILTER} ORDER BY id LIMIT 5 OFFSET 3").fetchall()
    assert oracle.calls <= 64
    ordered = full(big, f"SELECT id FROM t WHERE {FILTER} ORDER BY id")
    assert rows == ordered[3:8]


@pytest.mark.parametrize("direction", ["ASC", "DESC"])
def test_order_by_a_driving_column_then_limit_is_exact_and_cheap(
    big: duckdb_sem.SemConnection, oracle: RuleBackend, direction: str
) -> None:
    sql = f"SELECT id, txt FROM t WHERE {FILTER} ORDER BY id {direction}"
    rows = big.sql(sql + " LIMIT 7").fetchall()
    assert oracle.calls <= 64
    assert rows == full(big, sql)[:7]


def test_order_by_a_semantic_output_runs_every_row(
    big: duckdb_sem.SemConnection, oracle: RuleBackend
) -> None:
    big.execute("CREATE TABLE small AS SELECT * FROM t WHERE id < 300")
    sql = "SELECT id, sem_map('Sum {txt}') AS s FROM small ORDER BY s"
    rows = big.sql(sql + " LIMIT 3").fetchall()
    assert oracle.calls == 300  # the order needs every answer
    assert rows == full(big, sql)[:3]


def test_sem_map_limit_asks_only_the_rows_it_returns(
    big: duckdb_sem.SemConnection, oracle: RuleBackend
) -> None:
    rows = big.sql("SELECT id, sem_map('Sum {txt}') AS s FROM t LIMIT 3").fetchall()
    assert len(rows) == 3 and all(s == f"Sum row {i}" for i, s in rows)
    assert oracle.calls <= 8


def test_self_join_limit_10_with_half_the_pairs_matching(oracle: RuleBackend) -> None:
    con = duckdb_sem.connect(backend=oracle, cache="off")
    con.execute("CREATE TABLE m AS SELECT range AS id, 'review ' || range AS txt FROM range(35)")
    sql = (
        "SELECT a.id, b.id FROM m a JOIN m b ON a.id < b.id "
        "AND sem_join('Do {a.txt} and {b.txt} agree?')"
    )
    rows = con.sql(sql + " LIMIT 10").fetchall()
    calls = oracle.calls
    everything = set(con.sql(sql).fetchall())
    assert len(rows) == 10 and set(rows) <= everything
    assert 200 < len(everything) < 400  # about half of the 595 pairs match
    assert calls <= 100, calls


def test_limit_larger_than_the_answer_returns_it_all(
    big: duckdb_sem.SemConnection, oracle: RuleBackend
) -> None:
    big.execute("CREATE TABLE small AS SELECT * FROM t WHERE id < 50")
    sql = f"SELECT id FROM small WHERE {FILTER} ORDER BY id"
    assert big.sql(sql + " LIMIT 1000").fetchall() == full(big, sql)
    assert big.sql(sql + " LIMIT 0").fetchall() == []


def test_con_sql_makes_no_call_until_fetched(
    big: duckdb_sem.SemConnection, oracle: RuleBackend
) -> None:
    rel = big.sql(f"SELECT id, txt FROM t WHERE {FILTER}")
    assert rel.columns == ["id", "txt"]
    assert [str(t) for t in rel.types] == ["BIGINT", "VARCHAR"]
    assert oracle.calls == 0
    assert len(rel.limit(4).fetchall()) == 4
    assert oracle.calls <= 64


def test_fetchone_streams_instead_of_running_the_query(
    big: duckdb_sem.SemConnection, oracle: RuleBackend
) -> None:
    rel = big.sql(f"SELECT id FROM t WHERE {FILTER}")
    first = rel.fetchone()
    more = rel.fetchmany(2)
    assert first is not None and len(more) == 2
    assert oracle.calls < 1_000  # one SEU or a few, not 20,000 rows


def test_a_relation_fetched_twice_is_answered_from_the_cache(
    oracle: RuleBackend, tmp_path: object
) -> None:
    con = duckdb_sem.connect(backend=oracle, cache=f"{tmp_path}/c.sqlite")
    con.execute("CREATE TABLE t AS SELECT range AS id, 'row ' || range AS txt FROM range(200)")
    rel = con.sql(f"SELECT id FROM t WHERE {FILTER}")
    first = rel.fetchall()
    calls = oracle.calls
    assert rel.fetchall() == first
    assert oracle.calls == calls == 200
    assert con.stats().physical_calls == 0 and con.stats().cache_hits == 200


def test_relation_api_limit_stops_too(big: duckdb_sem.SemConnection, oracle: RuleBackend) -> None:
    rows = big.table("t").sem_filter("Is this interesting? {txt}").limit(5).fetchall()
    assert len(rows) == 5
    assert oracle.calls <= 64


def test_parameterised_queries_are_planned(
    big: duckdb_sem.SemConnection, oracle: RuleBackend
) -> None:
    rows = big.sql(f"SELECT id FROM t WHERE {FILTER} AND id < ? LIMIT ?", params=[1000, 5])
    assert len(rows.fetchall()) == 5
    assert oracle.calls <= 64


@pytest.mark.parametrize(
    ("sql", "n", "offset", "expected"),
    [
        ("SELECT a FROM t", 5, 0, "SELECT a FROM t LIMIT 5"),
        ("SELECT a FROM t LIMIT 3", 5, 0, "SELECT a FROM t LIMIT 3"),
        ("SELECT a FROM t LIMIT 10", 5, 8, "SELECT a FROM t LIMIT 2 OFFSET 8"),
        (
            "SELECT a FROM t OFFSET 2",
            5,
            0,
            "SELECT * FROM (SELECT a FROM t OFFSET 2) AS __sem_limited LIMIT 5",
        ),
    ],
)
def test_with_limit_merges_or_wraps(sql: str, n: int, offset: int, expected: str) -> None:
    assert with_limit(sql, n, offset) == expected
