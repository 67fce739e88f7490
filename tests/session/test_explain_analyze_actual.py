"""``EXPLAIN ANALYZE SEMANTIC`` prints what the run did beside each estimate: calls and tokens
under ``estimated:``, wall time under the estimated time, money under the estimated money."""

from __future__ import annotations

import re

import duckdb_sem


def test_actual_calls_tokens_time_and_money_sit_under_the_estimates() -> None:
    con = duckdb_sem.connect(backend="test:?yes_if=good", cache="off",
                             price_per_mtok_in=1.0, price_per_mtok_out=2.0)  # fmt: skip
    con.execute("CREATE TABLE r AS SELECT i AS id, CASE WHEN i % 2 = 0 THEN 'good' ELSE 'bad' "
                "END || ' film ' || i AS text FROM range(12) t(i)")  # fmt: skip
    text = con.explain_semantic(
        "SELECT id FROM r WHERE id < 10 AND sem_filter('Is {text} good?')", analyze=True
    )
    stats = con.stats()
    con.close()
    lines = text.splitlines()
    est = next(i for i, line in enumerate(lines) if line.startswith("estimated:"))
    assert "calls≈10 " in lines[est]  # ten rows pass `id < 10`, counted before the query
    actual = lines[est + 1]
    assert actual.startswith("actual: calls 10 ")
    assert (
        f"tokens {stats.prompt_tokens:,} prompt + {stats.completion_tokens:,} completion" in actual
    )
    assert stats.prompt_tokens > 0 and stats.physical_calls == 10
    timed = next(i for i, line in enumerate(lines) if line.startswith("time"))
    assert re.match(r"wall time \d+\.\d\d s$", lines[timed + 1]), lines[timed + 1]
    money = next(i for i, line in enumerate(lines) if line.startswith("money≈"))
    assert (
        lines[money + 1].startswith("money $") and "actual, for the tokens sent" in lines[money + 1]
    )


def test_the_unplanned_road_says_what_it_did_too() -> None:
    con = duckdb_sem.connect(backend="test:?yes_if=good", cache="off")
    con.execute("CREATE TABLE r AS SELECT i AS id, 'good ' || i AS text FROM range(3) t(i)")
    text = con.explain_semantic(
        "SELECT r.id FROM r LEFT JOIN r AS s ON r.id = s.id WHERE sem_filter('Is {r.text} ok?')",
        analyze=True,
    )
    con.close()
    assert "not planned by the optimizer" in text
    assert "actual: calls 3 " in text and "wall time" in text
