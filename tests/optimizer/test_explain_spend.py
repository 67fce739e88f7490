"""EXPLAIN SEMANTIC's estimate of calls, tokens, time on the backend and money."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.backends.throughput import Throughput
from duckdb_sem.config import Settings
from duckdb_sem.errors import ConfigError
from duckdb_sem.optimizer.spend import Price, Spend, spend_lines

QUERY = (
    "SELECT id, sem_map('{text} in two words') AS g FROM reviews WHERE sem_filter('{text} good')"
)


def _open(rows: int, **options: float) -> duckdb_sem.SemConnection:
    con = duckdb_sem.connect(
        backend=RuleBackend(yes_if=["good"], latency_ms=20, max_batch=8), cache="off", **options
    )
    con.execute(
        "CREATE TABLE reviews AS SELECT range AS id, 'review number ' || range AS text "
        f"FROM range({rows})"
    )
    return con


@pytest.fixture
def small() -> Iterator[duckdb_sem.SemConnection]:
    con = _open(200)
    yield con
    con.close()


def _figures(text: str) -> tuple[float, float, float, float]:
    """calls, prompt tokens, completion tokens and seconds from the estimate lines."""
    est = re.search(r"^estimated: calls≈([\d,.]+)  tokens≈([\d,.]+) prompt \+ ([\d,.]+) "
                    r"completion", text, re.MULTILINE)  # fmt: skip
    secs = re.search(r"^time≈([\d,.e+-]+) s on ", text, re.MULTILINE)
    assert est and secs, text
    calls, prompt, completion = (float(g.replace(",", "")) for g in est.groups())
    return calls, prompt, completion, float(secs.group(1).replace(",", ""))


def test_doubling_the_rows_doubles_the_estimated_calls_and_time(
    small: duckdb_sem.SemConnection,
) -> None:
    big = _open(400)
    try:
        calls1, prompt1, _, secs1 = _figures(small.explain_semantic(QUERY))
        calls2, prompt2, _, secs2 = _figures(big.explain_semantic(QUERY))
    finally:
        big.close()
    # 200 filter calls + 100 maps (default selectivity 1/2): 300 calls, 20 ms per 8 requests
    assert calls1 == 300
    assert secs1 == pytest.approx(300 * 0.020 / 8, rel=0.01)
    assert calls2 == 2 * calls1 and secs2 == pytest.approx(2 * secs1, rel=0.01)
    assert prompt2 == pytest.approx(2 * prompt1, rel=0.02)


def test_the_time_line_says_where_its_figure_comes_from(small: duckdb_sem.SemConnection) -> None:
    text = small.explain_semantic(QUERY)
    assert "latency_ms=20 per batch of 8" in text
    sim = duckdb_sem.connect(backend="sim:tiny", cache="off")
    try:
        sim.execute(
            "CREATE TABLE reviews AS SELECT range AS id, 'r ' || range AS text FROM range(50)"
        )
        line = next(x for x in sim.explain_semantic(QUERY).splitlines() if x.startswith("time"))
    finally:
        sim.close()
    assert "SIMULATED profile tiny" in line and "prefill 10,000 tok/s" in line


def test_no_price_configured_shows_no_money(small: duckdb_sem.SemConnection) -> None:
    assert "money" not in small.explain_semantic(QUERY)
    assert "$" not in small.explain_semantic(QUERY)


def test_a_price_shows_the_money_of_the_estimated_tokens() -> None:
    con = _open(200, price_per_mtok_in=2.5, price_per_mtok_out=10.0)
    try:
        text = con.explain_semantic(QUERY)
        rows = [r[0] for r in con.sql("EXPLAIN SEMANTIC " + QUERY).fetchall()]
    finally:
        con.close()
    _, prompt, completion, _ = _figures(text)
    money = re.search(r"^money≈\$([\d.e-]+) at \$2.5 / \$10 per million", text, re.MULTILINE)
    assert money, text
    expected = (prompt * 2.5 + completion * 10.0) / 1e6
    assert float(money.group(1)) == pytest.approx(expected, rel=0.05)  # 2 significant digits
    assert any(r.startswith("money≈$") for r in rows)


def test_the_price_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUCKDB_SEM_PRICE_IN", "0.15")
    monkeypatch.setenv("DUCKDB_SEM_PRICE_OUT", "0.6")
    settings = Settings.from_env()
    assert (settings.price_per_mtok_in, settings.price_per_mtok_out) == (0.15, 0.6)
    monkeypatch.setenv("DUCKDB_SEM_PRICE_OUT", "cheap")
    with pytest.raises(ConfigError, match="DUCKDB_SEM_PRICE_OUT='cheap' is not a number"):
        Settings.from_env()


def test_a_negative_price_is_refused() -> None:
    with pytest.raises(ConfigError, match="price_per_mtok_in must be a price >= 0"):
        duckdb_sem.connect(backend="test:", cache="off", price_per_mtok_in=-1.0)


def test_a_backend_without_a_throughput_figure_says_so() -> None:
    lines = spend_lines(Spend(10, 1000, 10), backend="openai:http://x/v1", throughput=None)
    assert lines[1].startswith("time: not estimated on openai:http://x/v1")
    assert not any("money" in line for line in lines)


def test_replicas_divide_the_time() -> None:
    rate = Throughput(1000.0, 10.0, source="doc")
    one = spend_lines(Spend(10, 1000, 10), backend="b", throughput=rate)
    two = spend_lines(Spend(10, 1000, 10), backend="b", throughput=rate, replicas=2)
    assert one[1].startswith("time≈2 s on b (doc)")
    assert two[1].startswith("time≈1 s on b, 2 replicas")
    priced = spend_lines(Spend(10, 1000, 10), backend="b", throughput=rate,
                         price=Price(1.0, 0.0, "test"))  # fmt: skip
    assert priced[2].startswith("money≈$0.001 at $1 / $0 per million")


def test_each_named_model_gets_its_own_time_line() -> None:
    con = duckdb_sem.connect(
        backend=RuleBackend(yes_if=["good"], latency_ms=20, max_batch=8),
        models={"slow": RuleBackend(yes_if=["good"], latency_ms=80, max_batch=8)},
        cache="off",
    )
    con.execute(
        "CREATE TABLE reviews AS SELECT range AS id, 'review ' || range AS text FROM range(80)"
    )
    q = (
        "SELECT id, sem_map('{text} in two words', model := 'slow') AS g FROM reviews "
        "WHERE sem_filter('{text} good')"
    )
    lines = [x for x in con.explain_semantic(q).splitlines() if x.startswith("time")]
    con.close()
    assert len(lines) == 2, lines
    default, slow = lines
    # 80 filter calls at 20 ms per 8 on the default; 40 maps at 80 ms per 8 on 'slow'
    assert default.startswith("time≈0.2 s on ") and "latency_ms=20" in default
    assert slow.startswith("time≈0.4 s on model slow (") and "latency_ms=80" in slow
