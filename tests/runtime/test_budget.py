"""Per-query budgets: a query fails before its backend work passes them; cached answers are
free, so a rerun fits; settable per connection, in SQL and from the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.errors import BudgetExceededError, ConfigError

SQL = "SELECT id FROM t WHERE sem_filter('Is {txt} fine?')"


def make(tmp_path: Path, oracle: RuleBackend, **kw: object) -> duckdb_sem.SemConnection:
    con = duckdb_sem.connect(backend=oracle, cache=str(tmp_path / "c.sqlite"), **kw)  # type: ignore[arg-type]
    con.execute("CREATE TABLE t AS SELECT range AS id, 'row ' || range AS txt FROM range(300)")
    return con


@pytest.mark.parametrize("optimize", [True, False])
def test_max_llm_calls_stops_the_query_before_it_passes(tmp_path: Path, optimize: bool) -> None:
    oracle = RuleBackend(hash_share=0.5)
    con = make(tmp_path, oracle, max_llm_calls=100, optimize=optimize)
    with pytest.raises(BudgetExceededError, match="max_llm_calls=100"):
        con.sql(SQL).fetchall()
    assert 0 < oracle.calls <= 100
    asked = oracle.calls
    con.execute("SET duckdb_sem.max_llm_calls = 1000")
    assert con.sql("SHOW duckdb_sem.max_llm_calls").fetchall() == [("1000",)]
    full = con.sql(SQL).fetchall()
    assert oracle.calls == 300  # the first try's answers were cached, not asked again
    assert con.stats().cache_hits == asked
    con.execute("SET duckdb_sem.max_llm_calls = 0")
    assert con.sql(SQL).fetchall() == full  # everything cached: a rerun costs nothing
    con.execute("RESET duckdb_sem.max_llm_calls")
    assert con.sql("SHOW duckdb_sem.max_llm_calls").fetchall() == [("100",)]


def test_limit_queries_fit_a_small_budget(tmp_path: Path) -> None:
    con = make(tmp_path, RuleBackend(hash_share=0.5), max_llm_calls=64)
    assert len(con.sql(SQL + " LIMIT 5").fetchall()) == 5


def test_max_prompt_tokens(tmp_path: Path) -> None:
    con = make(tmp_path, RuleBackend(hash_share=0.5), max_prompt_tokens=500)
    with pytest.raises(BudgetExceededError, match="max_prompt_tokens=500"):
        con.sql(SQL).fetchall()


def test_budget_from_the_environment_and_bad_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DUCKDB_SEM_MAX_LLM_CALLS", "10")
    con = make(tmp_path, RuleBackend(hash_share=0.5))
    with pytest.raises(BudgetExceededError):
        con.sql(SQL).fetchall()
    with pytest.raises(ConfigError, match="unknown setting"):
        con.execute("SET duckdb_sem.max_llm_cals = 3")
    with pytest.raises(ConfigError, match="whole number"):
        con.execute("SET duckdb_sem.max_llm_calls = 'lots'")
    monkeypatch.setenv("DUCKDB_SEM_MAX_LLM_CALLS", "-1")
    with pytest.raises(ConfigError, match=">= 0"):
        duckdb_sem.connect(backend=RuleBackend(), cache="off")


def test_install_takes_the_same_budget(tmp_path: Path) -> None:
    """``install(con, max_llm_calls=...)``: the UDF road in a plain DuckDB connection is bounded
    like ``connect()``'s, from one ``session.new_query()`` to the next."""
    import duckdb

    oracle = RuleBackend(hash_share=0.5)
    db = duckdb.connect()
    session = duckdb_sem.install(db, backend=oracle, cache="off", max_llm_calls=50)
    db.execute("CREATE TABLE t AS SELECT range AS id, 'row ' || range AS txt FROM range(300)")
    with pytest.raises(duckdb.Error, match="max_llm_calls=50"):
        db.sql("SELECT id FROM t WHERE sem_filter('Is {0} fine?', txt)").fetchall()
    assert oracle.calls <= 50  # refused before passing it (a whole batch would)
    session.new_query()
    rows = db.sql("SELECT id FROM t WHERE id < 20 AND sem_filter('Is {0} fine?', txt)").fetchall()
    assert 0 < len(rows) < 20
    assert oracle.calls == 20


def test_a_cursor_keeps_the_connection_s_budget(tmp_path: Path) -> None:
    oracle = RuleBackend(hash_share=0.5)
    con = make(tmp_path, oracle)
    con.execute("SET duckdb_sem.max_llm_calls = 50")
    cursor = con.cursor()
    assert cursor.sql("SHOW duckdb_sem.max_llm_calls").fetchall() == [("50",)]
    with pytest.raises(BudgetExceededError, match="max_llm_calls=50"):
        cursor.sql(SQL).fetchall()
    assert oracle.calls <= 50
