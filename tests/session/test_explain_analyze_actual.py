"""``EXPLAIN ANALYZE SEMANTIC`` prints what the run did right under the estimate: calls,
prompt and completion tokens, wall time and (with a price) money."""

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
    actual = lines[est + 1]  # right under the estimate
    assert actual.startswith("actual: calls 10 (10 to a backend, 0 cached")
    asked = f"tokens {stats.prompt_tokens:,} prompt + {stats.completion_tokens:,} completion asked"
    assert asked in actual and stats.prompt_tokens > 0
    assert (
        f", {stats.physical_prompt_tokens:,} + {stats.physical_completion_tokens:,} sent" in actual
    )
    assert re.search(r"  wall \d+\.\d\d s  money \$", actual), actual
    dollars = (stats.physical_prompt_tokens * 1.0 + stats.physical_completion_tokens * 2.0) / 1e6
    assert actual.endswith(f"money ${dollars:.2g}")


def test_the_unplanned_road_says_what_it_did_too() -> None:
    con = duckdb_sem.connect(backend="test:?yes_if=good", cache="off")
    con.execute("CREATE TABLE r AS SELECT i AS id, 'good ' || i AS text FROM range(3) t(i)")
    text = con.explain_semantic(
        "SELECT r.id FROM r LEFT JOIN r AS s ON r.id = s.id WHERE sem_filter('Is {r.text} ok?')",
        analyze=True,
    )
    con.close()
    assert "not planned by the optimizer" in text
    last = text.splitlines()[-1]
    assert last.startswith("actual: calls 3 (3 to a backend") and " wall " in last
    assert "money" not in last  # no price set
