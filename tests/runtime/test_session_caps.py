"""Per-session caps in process: the sum over a connection's (and its cursors') queries.

``max_llm_calls_per_session``, ``max_prompt_tokens_per_session`` and ``max_cost_per_session``
(``connect()``/``install()`` options, ``DUCKDB_SEM_*`` variables, ``SET``) bound every query of
one session together: the query whose next batch would pass one fails before that batch is
sent. The backend is the deterministic ``test:`` rule backend; each test's rows carry its own
name, so no other test's answers are its cache hits (the process shares one scheduler per spec).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

import duckdb_sem
from duckdb_sem.errors import BudgetExceededError, ConfigError

BACKEND = "test:?yes_if=7"
PRICED = "test:?yes_if=7&price_in=1000&price_out=2000"


def make(tmp_path: Path, backend: str = BACKEND, **kw: object) -> duckdb_sem.SemConnection:
    con = duckdb_sem.connect(backend=backend, cache="off", batch_size=10, **kw)  # type: ignore[arg-type]
    con.execute("CREATE TABLE t AS SELECT range AS id, 'row ' || range || ' of ' || $1 AS txt "
                "FROM range(300)", [tmp_path.name])  # fmt: skip
    return con


def rows(lo: int, hi: int, word: str = "fine") -> str:
    """A filter over ids lo..hi-1: one backend call per row."""
    return f"SELECT id FROM t WHERE id >= {lo} AND id < {hi} AND sem_filter('Is {{txt}} {word}?')"


def test_a_session_cap_counts_every_query_and_fails_before_the_batch(tmp_path: Path) -> None:
    con = make(tmp_path, max_llm_calls_per_session=50)
    con.sql(rows(0, 30)).fetchall()
    assert con.stats().physical_calls == 30
    with pytest.raises(BudgetExceededError) as caught:
        con.sql(rows(30, 60)).fetchall()
    message = str(caught.value)
    assert "has made 50 of its 50 LLM calls" in message and "next batch needs 10" in message
    assert "SET duckdb_sem.max_llm_calls_per_session = N" in message
    assert "DUCKDB_SEM_MAX_LLM_CALLS_PER_SESSION" in message and "RESET" in message
    assert caught.value.sqlstate == "54000"
    assert con.stats().physical_calls == 20  # two batches of ten, then refused
    assert con.budget.session is not None and con.budget.session.used()[0] == 50
    with pytest.raises(BudgetExceededError, match="of its 50 LLM calls"):
        con.sql(rows(100, 101)).fetchall()  # even one more call


def test_cursors_share_the_count_and_reset_starts_it_again(tmp_path: Path) -> None:
    con = make(tmp_path, max_llm_calls_per_session=40)
    cur = con.cursor()
    cur.sql(rows(0, 30)).fetchall()
    with pytest.raises(BudgetExceededError, match="has made 40 of its 40"):
        con.sql(rows(30, 60)).fetchall()
    assert con.stats().physical_calls == 10  # one batch fitted
    with pytest.raises(BudgetExceededError, match="has made 40 of its 40"):
        cur.sql(rows(60, 70)).fetchall()
    assert con.sql("SHOW duckdb_sem.max_llm_calls_per_session").fetchall() == [("40",)]
    con.execute("RESET duckdb_sem.max_llm_calls_per_session")  # back to 40, counted from 0
    assert con.sql("SHOW duckdb_sem.max_llm_calls_per_session").fetchall() == [("40",)]
    con.sql(rows(60, 100)).fetchall()
    assert con.stats().physical_calls == 40
    other = make(tmp_path.parent / (tmp_path.name + "b"), max_llm_calls_per_session=40)
    other.sql(rows(0, 40)).fetchall()  # a new connection starts at zero
    assert other.stats().physical_calls == 40


def test_set_counts_the_queries_before_it(tmp_path: Path) -> None:
    con = make(tmp_path)
    assert con.sql("SHOW duckdb_sem.max_llm_calls_per_session").fetchall() == [("DEFAULT",)]
    con.sql(rows(0, 30)).fetchall()  # no cap yet, yet counted
    con.execute("SET duckdb_sem.max_llm_calls_per_session = 35")
    with pytest.raises(BudgetExceededError, match="has made 30 of its 35"):
        con.sql(rows(30, 60)).fetchall()
    assert con.stats().physical_calls == 0
    con.execute("SET duckdb_sem.max_llm_calls_per_session = NULL")
    con.sql(rows(30, 60)).fetchall()
    assert con.stats().physical_calls == 30
    with pytest.raises(ConfigError, match="whole number of llm_calls"):
        con.execute("SET duckdb_sem.max_llm_calls_per_session = 'many'")


def test_prompt_tokens_and_cost_per_session(tmp_path: Path) -> None:
    con = make(tmp_path, backend=PRICED, max_cost_per_session=1.0)
    con.sql(rows(0, 10)).fetchall()
    first = con.stats().cost_usd
    assert 0 < first < 1.0
    with pytest.raises(BudgetExceededError) as caught:
        con.sql(rows(10, 300)).fetchall()
    assert "of its $1.00" in str(caught.value) and "max_cost_per_session" in str(caught.value)
    assert first + con.stats().cost_usd <= 1.0  # never past the cap
    assert con.budget.session is not None
    assert con.budget.session.spent() == pytest.approx(first + con.stats().cost_usd)
    tokens = make(tmp_path.parent / (tmp_path.name + "t"), max_prompt_tokens_per_session=1000)
    with pytest.raises(BudgetExceededError, match="of its 1,000 prompt tokens"):
        tokens.sql(rows(0, 300)).fetchall()
    assert 0 < tokens.stats().physical_prompt_tokens <= 1000


def test_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUCKDB_SEM_MAX_LLM_CALLS_PER_SESSION", "15")
    monkeypatch.setenv("DUCKDB_SEM_MAX_COST_PER_SESSION", "2.5")
    con = make(tmp_path)
    assert con.sql("SHOW duckdb_sem.max_cost_per_session").fetchall() == [("2.5",)]
    con.sql(rows(0, 10)).fetchall()
    with pytest.raises(BudgetExceededError, match="has made 10 of its 15"):
        con.sql(rows(10, 20)).fetchall()
    monkeypatch.setenv("DUCKDB_SEM_MAX_PROMPT_TOKENS_PER_SESSION", "-3")
    with pytest.raises(ConfigError, match="DUCKDB_SEM_MAX_PROMPT_TOKENS_PER_SESSION"):
        duckdb_sem.connect(backend=BACKEND, cache="off")


def test_install_counts_the_sessions_queries(tmp_path: Path) -> None:
    db = duckdb.connect()
    duckdb_sem.install(db, backend=BACKEND, cache="off", batch_size=10,
                       max_llm_calls_per_session=25)  # fmt: skip
    db.execute("CREATE TABLE t AS SELECT range AS id, 'row ' || range || ' of ' || $1 AS txt "
               "FROM range(300)", [tmp_path.name])  # fmt: skip
    sql = "SELECT id FROM t WHERE id >= {} AND id < {} AND sem_filter('Is {{0}} fine?', txt)"
    db.sql(sql.format(0, 20)).fetchall()
    with pytest.raises(duckdb.Error, match="has made 20 of its 25"):
        db.sql(sql.format(20, 40)).fetchall()
