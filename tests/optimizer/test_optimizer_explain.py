from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.cli.query import query as query_command
from duckdb_sem.errors import PlanError
from duckdb_sem.optimizer import plan_query
from duckdb_sem.session.explain import explain_semantic

QUERY = (
    "SELECT r.id, sem_map('{r.text} gist') AS gist FROM reviews r JOIN movies m "
    "ON r.movie_id = m.id WHERE sem_filter('{r.text} is positive') AND m.id > 3"
)


@pytest.fixture
def con() -> Iterator[duckdb_sem.SemConnection]:
    c = duckdb_sem.connect(backend=RuleBackend(yes_if=["good"]), cache="off")
    c.duckdb.execute(
        "CREATE TABLE reviews AS SELECT range AS id, range % 10 AS movie_id, "
        "CASE WHEN range % 2 = 0 THEN 'good ' ELSE 'bad ' END || range AS text FROM range(100);"
        "CREATE TABLE movies AS SELECT range AS id FROM range(10)"
    )
    yield c
    c.close()


def test_explain_prints_count_chosen_plan_and_runners_up(con: duckdb_sem.SemConnection) -> None:
    text = con.explain_semantic(QUERY)
    assert re.search(r"^6 equivalent plans$", text, re.MULTILINE)
    assert "chosen plan, cost" in text
    assert re.search(r"SemFilter .*rows≈\S+\s+calls≈\S+\s+tokens≈", text)
    assert "runner-up plans:" in text and "  2. cost " in text


def test_explain_semantic_statement(con: duckdb_sem.SemConnection) -> None:
    lines = [row[0] for row in con.sql("EXPLAIN SEMANTIC " + QUERY).fetchall()]
    assert lines[0] == "6 equivalent plans"


def test_explain_analyze_shows_actuals(con: duckdb_sem.SemConnection) -> None:
    text = explain_semantic(con, QUERY, analyze=True)
    line = next(ln for ln in text.splitlines() if "SemFilter" in ln and "calls" in ln)
    assert "actual rows=30 calls=60" in line  # 60 reviews of movies 4..9, 30 of them good
    assert re.search(r"SemMap .*actual rows=30 calls=30", text)


def test_plan_query_returns_the_cheapest_plan(con: duckdb_sem.SemConnection) -> None:
    plan = plan_query(con, QUERY)
    assert plan.equivalent_plans == 6 and plan.cost > 0


def test_plain_sql_is_not_planned(con: duckdb_sem.SemConnection) -> None:
    with pytest.raises(PlanError):
        plan_query(con, "SELECT * FROM reviews")


def test_explain_costs_the_limit_the_run_stops_at(con: duckdb_sem.SemConnection) -> None:
    q = "SELECT r.id FROM reviews r WHERE sem_filter('{r.text} is positive')"
    full = con.explain_semantic(q)
    limited = con.explain_semantic(q + " LIMIT 5")
    calls = re.compile(r"SemFilter .*calls≈(\S+)")
    full_calls = float(calls.search(full).group(1))  # type: ignore[union-attr]
    limited_calls = float(calls.search(limited).group(1))  # type: ignore[union-attr]
    assert full_calls == 100 and limited_calls == 10  # 5 rows at the default selectivity 0.5
    assert "statistics: " in limited


def test_explain_says_when_a_statement_is_not_planned(con: duckdb_sem.SemConnection) -> None:
    text = con.explain_semantic(
        "SELECT g.id FROM reviews g LEFT JOIN reviews h ON h.id = g.id + 100 "
        "WHERE sem_filter('{g.text} is good')"
    )
    assert text.startswith("not planned by the optimizer: ")
    assert "DuckDB plan:" in text and "__semudf_filter" in text


def test_explain_verbose_shows_what_each_operator_asks(con: duckdb_sem.SemConnection) -> None:
    rows = con.sql("EXPLAIN SEMANTIC VERBOSE " + QUERY).fetchall()
    text = "\n".join(r[0] for r in rows)
    assert "prompts (the first row of each operator):" in text
    # the rendered first row of reviews (id 0 is 'good 0'), as the backend would receive it
    assert "[user] good 0 is positive" in text
    assert "[user] good 0 gist" in text
    assert "decoding: max_tokens=1 temperature=0.0 seed=0; output: decide BOOLEAN" in text
    assert "backend: test:" in text


def test_show_prompts_on_the_command_line(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    setup = duckdb.connect(str(db))
    setup.execute("CREATE TABLE r AS SELECT range AS id, 'row ' || range AS text FROM range(20)")
    setup.close()
    result = CliRunner().invoke(
        query_command,
        ["--db", str(db), "--backend", "test:?hash=0.5", "--cache", "off", "--show-prompts",
         "SELECT id FROM r WHERE sem_filter('Is {text} fine?') LIMIT 2"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "[user] Is row 0 fine?" in result.output
