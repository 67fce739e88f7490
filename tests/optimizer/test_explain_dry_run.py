"""EXPLAIN SEMANTIC of statements off the optimizer: estimated by a dry run, and per-model prices.

The dry run's decisions use the rule of ``test:`` without options (yes when a hash of the
rendered row falls under 0.5), so on that backend the dry run must count exactly the calls a
real cold run makes: the tests compare the two.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import duckdb_sem
from duckdb_sem.backends.registry import SpecPrice, create_backend, split_price
from duckdb_sem.errors import ConfigError

#: a statement the optimizer does not plan (an outer join): the UDF path, estimated by a dry run
CTE = (
    "WITH r AS (SELECT id, text FROM reviews WHERE id < 300) "
    "SELECT r.id, sem_map('{r.text} in two words') AS g FROM r LEFT JOIN reviews s "
    "ON s.id = r.id + 5000 WHERE sem_filter('{r.text} good')"
)
OUTER = "FROM reviews r LEFT JOIN reviews s ON s.id = r.id + 5000"
TOPK = (
    "SELECT * FROM sem_topk('SELECT id, text FROM reviews WHERE id < 60 AND "
    "sem_filter(''{text} fine'')', 3, 'best {text}')"
)


def _open(cache: str = "off", **options: object) -> duckdb_sem.SemConnection:
    con = duckdb_sem.connect(backend="test:", cache=cache, **options)  # type: ignore[arg-type]
    con.execute(
        "CREATE TABLE reviews AS SELECT range AS id, 'review number ' || range AS text "
        "FROM range(1000)"
    )
    return con


@pytest.fixture
def con() -> Iterator[duckdb_sem.SemConnection]:
    c = _open()
    yield c
    c.close()


def _calls(text: str) -> float:
    found = re.search(r"^estimated: calls≈([\d,.]+)  tokens≈", text, re.MULTILINE)
    assert found, text
    return float(found.group(1).replace(",", ""))


@pytest.mark.parametrize(
    "query",
    [CTE, TOPK, TOPK[:-1] + ", method := 'pairwise')", TOPK[:-1] + ", method := 'listwise')"],
    ids=["cte", "table-function", "topk-pairwise", "topk-listwise"],
)
def test_the_dry_run_counts_the_calls_a_cold_run_makes(
    con: duckdb_sem.SemConnection, query: str
) -> None:
    text = con.explain_semantic(query)
    assert text.startswith("not planned by the optimizer")
    assert "estimated by a dry run" in text
    assert con.stats().llm_calls == 0  # EXPLAIN asked no model
    estimated = _calls(text)
    con.sql(query).fetchall()
    assert con.stats().physical_calls == estimated > 0


def test_the_same_figures_through_sql_and_explain_semantic(con: duckdb_sem.SemConnection) -> None:
    rows = [r[0] for r in con.sql("EXPLAIN SEMANTIC " + CTE).fetchall()]
    assert _calls("\n".join(rows)) == _calls(con.explain_semantic(CTE))
    assert any(r.startswith("time≈") for r in rows)


def test_a_dry_run_changes_nothing_and_caches_nothing(tmp_path: Path) -> None:
    cache = tmp_path / "cache.sqlite"
    con = _open(cache=str(cache))
    try:
        con.execute("CREATE TABLE gists (g VARCHAR)")
        for ddl in (
            f"CREATE TABLE made AS SELECT sem_map('{{r.text}} short') AS g {OUTER}",
            f"INSERT INTO gists SELECT sem_map('{{r.text}} short') {OUTER} WHERE r.id < 10",
        ):
            text = con.explain_semantic(ddl)
            assert _calls(text) > 0, text
        tables = {
            r[0] for r in con.sql("SELECT table_name FROM information_schema.tables").fetchall()
        }
        assert "made" not in tables
        assert con.sql("SELECT count(*) FROM gists").fetchone() == (0,)
        # the next real run is cold: the dry run put nothing in the cache
        con.sql("SELECT sem_map('{text} short') FROM reviews WHERE id < 10").fetchall()
        assert con.stats().physical_calls == 10
    finally:
        con.close()


def test_a_statement_acting_outside_the_database_is_not_dry_run(
    con: duckdb_sem.SemConnection, tmp_path: Path
) -> None:
    out = tmp_path / "out.csv"
    text = con.explain_semantic(f"COPY (SELECT sem_map('{{text}} x') FROM reviews) TO '{out}'")
    assert "estimated: not available (COPY statements act outside the database" in text
    assert "EXPLAIN SEMANTIC the query inside it" in text
    assert not out.exists()


def test_each_named_model_has_its_time_and_price(con: duckdb_sem.SemConnection) -> None:
    priced = duckdb_sem.connect(
        backend="test:", cache="off", price_per_mtok_in=1.0, price_per_mtok_out=2.0,
        models={"fast": "test:?price_in=0.1&price_out=0.4", "free": "test:?selectivity=0.3"},
    )  # fmt: skip
    try:
        priced.execute("CREATE TABLE reviews AS SELECT range AS id, 'r ' || range AS text "
                       "FROM range(100)")  # fmt: skip
        query = (
            "SELECT sem_map('{r.text} x', model := 'free') FROM reviews r LEFT JOIN reviews s "
            "ON s.id = r.id + 500 WHERE sem_filter('{r.text} ok', model := 'fast')"
        )
        lines = priced.explain_semantic(query).splitlines()
    finally:
        priced.close()
    assert any(x.startswith("time≈") and "model fast (test:)" in x for x in lines), lines
    assert any(x.startswith("time≈") and "model free (test:?selectivity=0.3)" in x for x in lines)
    fast = next(x for x in lines if x.startswith("  fast: money≈$"))
    assert "$0.1 / $0.4 per million" in fast and "model fast's spec" in fast
    free = next(x for x in lines if x.startswith("  free: money≈$"))
    assert "$1 / $2 per million" in free and "connect()" in free  # the connection's price
    assert not any(x.startswith("  default:") for x in lines)  # it made no call


def test_a_price_in_a_spec_changes_no_identity() -> None:
    plain = create_backend("test:?yes_if=good")
    priced = create_backend("test:?yes_if=good&price_in=2.5&price_out=10")
    assert plain.backend_id == priced.backend_id
    assert priced.spec == "test:?yes_if=good"
    assert split_price("llama:?price_out=3") == ("llama:", SpecPrice(0.0, 3.0))
    assert split_price("openai:http://h/v1?model=m") == ("openai:http://h/v1?model=m", None)
    with pytest.raises(ConfigError, match=r"price_in='cheap' must be a price in USD"):
        split_price("test:?price_in=cheap")
    with pytest.raises(ConfigError, match=r"price_out='-1' must be >= 0"):
        split_price("test:?price_out=-1")


def test_create_model_takes_a_price_too(con: duckdb_sem.SemConnection) -> None:
    con.execute("CREATE MODEL big USING 'test:?price_in=5&price_out=20'")
    query = f"SELECT sem_map('{{r.text}} x', model := 'big') {OUTER}"
    lines = con.explain_semantic(query).splitlines()
    assert any(x.startswith("money≈$") and "$5 / $20" in x for x in lines), lines


def test_a_temp_table_the_dry_run_cannot_see_is_said_so(con: duckdb_sem.SemConnection) -> None:
    con.execute("CREATE TEMP TABLE mine AS SELECT 'x' AS text")
    text = con.explain_semantic(
        "SELECT sem_map('{m.text} y') FROM mine m LEFT JOIN reviews r ON r.text = m.text"
    )
    assert "estimated: not available (the dry run failed" in text
    assert "cannot see this connection's TEMP tables" in text


def test_explain_analyze_runs_the_statement_and_adds_what_it_asked(tmp_path: Path) -> None:
    con = _open(cache=str(tmp_path / "cache.sqlite"))
    lines = con.explain_semantic(CTE, analyze=True).splitlines()
    actual = re.match(r"actual: calls ([\d,]+) \(([\d,]+) to a backend", lines[-1])
    assert actual, lines[-1]
    assert float(actual.group(2).replace(",", "")) == _calls("\n".join(lines)) > 0
    again = con.explain_semantic(CTE, analyze=True).splitlines()[-1]
    assert re.match(r"actual: calls [\d,]+ \(0 to a backend, [\d,]+ cached", again), again
    con.execute("CREATE TABLE g (x VARCHAR)")
    con.sql(f"EXPLAIN ANALYZE SEMANTIC INSERT INTO g SELECT sem_map('{{r.text}} y') {OUTER} "
            "WHERE r.id < 7").fetchall()  # fmt: skip
    assert con.sql("SELECT count(*) FROM g").fetchone() == (7,)  # as in Postgres: it ran
    con.close()
