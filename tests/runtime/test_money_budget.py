"""``max_cost``: a query fails before its spend at the models' prices would pass it.

The backend is the deterministic ``test:`` rule backend with a price in its spec
(``price_in`` / ``price_out``, USD per million tokens), so every figure is exact: the spend is
the backend's reported tokens at that price, the check before each batch uses the batch's
bound (estimated prompt tokens plus ``max_tokens``), and answers from the cache cost nothing.
Each test's rows carry its own name: the process shares one scheduler per backend spec, and
another test's answers must not be this one's cache hits.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

import duckdb_sem
from duckdb_sem.errors import BudgetExceededError, ConfigError

PRICED = "test:?yes_if=7&price_in=1000&price_out=2000"  # $0.001 a prompt token
SQL = "SELECT id FROM t WHERE sem_filter('Is {txt} fine?')"


def make(tmp_path: Path, backend: str = PRICED, **kw: object) -> duckdb_sem.SemConnection:
    con = duckdb_sem.connect(backend=backend, cache=str(tmp_path / "c.sqlite"), **kw)  # type: ignore[arg-type]
    con.execute("CREATE TABLE t AS SELECT range AS id, 'row ' || range || ' of ' || $1 AS txt "
                "FROM range(300)", [tmp_path.name])  # fmt: skip
    return con


def sevens(con: duckdb_sem.SemConnection) -> int:
    """The rows the rule backend says yes to."""
    (count,) = con.sql("SELECT count(*) FROM t WHERE txt LIKE '%7%'").fetchall()[0]
    return int(count)


def dollars(prompt: int, completion: int) -> float:
    return (prompt * 1000 + completion * 2000) / 1e6


@pytest.mark.parametrize("optimize", [True, False])
def test_max_cost_stops_the_query_before_it_passes(tmp_path: Path, optimize: bool) -> None:
    con = make(tmp_path, max_cost=5.0, optimize=optimize)
    with pytest.raises(BudgetExceededError) as caught:
        con.sql(SQL).fetchall()
    message = str(caught.value)
    assert "max_cost=$5.00" in message and "spent" in message
    assert "SET duckdb_sem.max_cost = N" in message and "DUCKDB_SEM_MAX_COST" in message
    assert caught.value.sqlstate == "54000"
    stats = con.stats()
    assert 0 < stats.physical_calls < 300 and stats.cache_hits == 0
    spent = dollars(stats.physical_prompt_tokens, stats.physical_completion_tokens)
    assert stats.cost_usd == pytest.approx(spent) and 0 < stats.cost_usd <= 5.0
    con.execute("SET duckdb_sem.max_cost = 100")
    assert con.sql("SHOW duckdb_sem.max_cost").fetchall() == [("100.0",)]
    full = con.sql(SQL).fetchall()
    again = con.stats()  # the first try's answers were cached, not asked again
    assert again.cache_hits == stats.physical_calls
    assert again.physical_calls == 300 - stats.physical_calls
    con.execute("SET duckdb_sem.max_cost = 0")
    assert con.sql(SQL).fetchall() == full  # everything cached: a rerun costs nothing
    assert con.stats().cost_usd == 0.0
    con.execute("RESET duckdb_sem.max_cost")
    assert con.sql("SHOW duckdb_sem.max_cost").fetchall() == [("5.0",)]


def test_the_spend_is_the_reported_tokens_at_the_price(tmp_path: Path) -> None:
    con = make(tmp_path)
    rows = con.sql(SQL + " LIMIT 10").fetchall()
    assert len(rows) == 10
    s = con.stats()
    assert s.physical_calls > 0
    assert s.cost_usd == pytest.approx(
        dollars(s.physical_prompt_tokens, s.physical_completion_tokens)
    )
    assert con.stats().as_dict()["cost_usd"] == s.cost_usd


def test_a_model_without_a_price_costs_nothing(tmp_path: Path) -> None:
    con = make(tmp_path, backend="test:?yes_if=7", max_cost=0.0)
    rows = con.sql(SQL).fetchall()
    assert con.stats().physical_calls == 300 and con.stats().cost_usd == 0.0  # every row asked
    assert len(rows) == sevens(con)


def test_the_connections_price_applies_to_a_spec_without_one(tmp_path: Path) -> None:
    con = make(tmp_path, backend="test:?yes_if=7", price_per_mtok_in=1000,
               price_per_mtok_out=2000, max_cost=4.0)  # fmt: skip
    with pytest.raises(BudgetExceededError, match=r"max_cost=\$4\.00"):
        con.sql(SQL).fetchall()
    assert 0 < con.stats().cost_usd <= 4.0


def test_a_named_model_is_charged_at_its_own_price(tmp_path: Path) -> None:
    con = make(tmp_path, backend="test:?yes_if=7",
               models={"big": "test:?yes_if=7&price_in=10000"})  # fmt: skip
    con.sql(
        "SELECT id FROM t WHERE sem_filter('Is {txt} fine?', model := 'big') LIMIT 5"
    ).fetchall()
    s = con.stats()
    assert s.physical_calls > 0
    assert s.cost_usd == pytest.approx(s.physical_prompt_tokens * 10_000 / 1e6)
    con.execute("SET duckdb_sem.max_cost = 0.001")  # less than one request of 'big'
    with pytest.raises(BudgetExceededError, match=r"max_cost=\$0\.001"):
        con.sql("SELECT id FROM t WHERE sem_filter('Is {txt} good?', model := 'big')").fetchall()
    assert con.stats().physical_calls == 0  # refused before the first batch was sent
    # the default model has no price: the same query on it runs
    assert con.sql("SELECT count(*) FROM t WHERE sem_filter('Is {txt} good?')").fetchall() == [
        (sevens(con),)
    ]


def test_explain_analyze_shows_the_money_spent(tmp_path: Path) -> None:
    con = make(tmp_path)
    text = con.explain_semantic(SQL + " LIMIT 3", analyze=True)
    actual = next(line for line in text.splitlines() if line.startswith("actual:"))
    assert "  money $" in actual
    spent = float(actual.rsplit("money $", 1)[1].split()[0].replace(",", ""))
    assert spent > 0 and spent == pytest.approx(con.stats().cost_usd, rel=0.05)


def test_from_the_environment_and_bad_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DUCKDB_SEM_MAX_COST", "3")
    con = make(tmp_path)
    assert con.sql("SHOW duckdb_sem.max_cost").fetchall() == [("3.0",)]
    with pytest.raises(BudgetExceededError, match=r"max_cost=\$3\.00"):
        con.sql(SQL).fetchall()
    with pytest.raises(ConfigError, match="amount in USD"):
        con.execute("SET duckdb_sem.max_cost = 'lots'")
    with pytest.raises(ConfigError, match="amount in USD"):
        con.execute("SET duckdb_sem.max_cost = -1")
    con.execute("SET duckdb_sem.max_cost = NULL")
    assert len(con.sql(SQL).fetchall()) == sevens(con)  # no limit
    for bad in ("-1", "lots"):
        monkeypatch.setenv("DUCKDB_SEM_MAX_COST", bad)
        with pytest.raises(ConfigError, match="DUCKDB_SEM_MAX_COST"):
            duckdb_sem.connect(backend=PRICED, cache="off")


def test_install_takes_max_cost(tmp_path: Path) -> None:
    """``install(con, max_cost=...)``: the UDF road in a plain DuckDB connection is bounded
    like ``connect()``'s, from one ``session.new_query()`` to the next."""
    db = duckdb.connect()
    session = duckdb_sem.install(db, backend=PRICED, cache="off", max_cost=4.0)
    db.execute("CREATE TABLE t AS SELECT range AS id, 'row ' || range || ' of ' || $1 AS txt "
               "FROM range(300)", [tmp_path.name])  # fmt: skip
    with pytest.raises(duckdb.Error, match=r"max_cost=\$4\.00"):
        db.sql("SELECT id FROM t WHERE sem_filter('Is {0} fine?', txt)").fetchall()
    assert 0 < session.query.stats().cost_usd <= 4.0
