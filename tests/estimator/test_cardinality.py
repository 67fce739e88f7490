"""Scan cardinalities from the data: DuckDB's estimate or a count, and predicates counted or
sampled (``optimizer.cardinality``), as EXPLAIN SEMANTIC shows them."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

import duckdb_sem
from duckdb_sem.optimizer.cardinality import EXACT_ROWS, duckdb_estimate, table_rows
from duckdb_sem.optimizer.cost import kept_key
from duckdb_sem.plan.build import build_plan


@pytest.fixture
def csv(tmp_path: Path) -> str:
    path = tmp_path / "reviews.csv"
    lines = ["id,text"] + [f"{i},review number {i} {'good' if i % 4 == 0 else 'bad'}"
                           for i in range(1, 21)]  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _explain(sql: str) -> str:
    con = duckdb_sem.connect(backend="test:?yes_if=good", cache="off")
    try:
        return con.explain_semantic(sql)
    finally:
        con.close()


def _scan_rows(text: str) -> float:
    line = next(line for line in text.splitlines() if "Scan " in line)
    found = re.search(r"rows≈([\d.,]+)", line)
    assert found is not None, line
    return float(found.group(1).replace(",", ""))


def _calls(text: str) -> float:
    found = re.search(r"estimated: calls≈([\d.,]+)", text)
    assert found is not None, text
    return float(found.group(1).replace(",", ""))


def test_a_20_row_csv_is_estimated_at_20_rows_and_20_calls(csv: str) -> None:
    text = _explain(f"SELECT id FROM '{csv}' WHERE sem_filter('Is {{text}} good?')")
    assert _scan_rows(text) == 20  # was 1,000: a table DuckDB had no size for
    assert _calls(text) == 20


def test_a_relational_predicate_is_counted_not_taken_as_a_third(csv: str) -> None:
    text = _explain(f"SELECT id FROM '{csv}' WHERE id <= 4 AND sem_filter('Is {{text}} good?')")
    assert _scan_rows(text) == 4  # was 20 / 3 = 6.7
    assert _calls(text) == 4


def test_a_table_function_is_counted(csv: str) -> None:
    text = _explain(
        f"SELECT id FROM read_csv('{csv}') WHERE id > 15 AND sem_filter('Is {{text}} good?')"
    )
    assert _calls(text) == 5


def test_a_large_source_samples_its_predicates() -> None:
    con = duckdb.connect()
    rows = EXACT_ROWS + 100_000
    con.execute(f"CREATE TABLE big AS SELECT i AS id, 'x' || i AS t FROM range({rows}) r(i)")
    plan = build_plan(
        "SELECT id FROM big WHERE id % 10 = 0 AND sem_filter('{t}')",
        lambda table: con.sql(f"SELECT * FROM {table} LIMIT 0").columns,
    )
    found = table_rows(con, plan)
    assert found["big"] == duckdb_estimate(con, "big") == rows  # a table's count is exact
    # a tenth of the rows, measured on a 10,000-row sample: within a few percent
    assert found[kept_key("big")] == pytest.approx(rows / 10, rel=0.1)


def test_a_source_duckdb_cannot_describe_keeps_the_default() -> None:
    con = duckdb.connect()
    assert duckdb_estimate(con, "no_such_table") is None


def test_group_by_groups_are_the_distinct_keys_counted(tmp_path: Path) -> None:
    path = tmp_path / "g.csv"
    path.write_text("k,text\n" + "".join(f"{i % 7},row {i}\n" for i in range(70)))
    text = _explain(f"SELECT k, sem_agg('Sum up {{text}}') AS s FROM '{path}' GROUP BY k")
    assert _calls(text) == 7  # seven groups, one summary each (the default said 70 / 10)
    text = _explain(
        f"SELECT k, sem_agg('Sum up {{text}}') AS s FROM '{path}' WHERE k < 3 GROUP BY k"
    )
    assert _calls(text) == 3


def test_groups_after_a_filter_are_the_share_of_groups_its_rows_meet() -> None:
    from duckdb_sem.optimizer.cost import CostModel

    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT i AS id, i % 100 AS g, 'x' AS v FROM range(1000) r(i)")
    sql = "SELECT g, sem_agg('{v}') AS s FROM t WHERE sem_filter('{v} ok') GROUP BY g"
    plan = build_plan(sql, lambda table: con.sql(f"SELECT * FROM {table} LIMIT 0").columns)
    rows = table_rows(con, plan)
    key = next(k for k in rows if k.startswith("#") and not k.endswith("@rows"))
    assert rows[key] == 100 and rows[key + "@rows"] == 1000
    model = CostModel(table_rows=rows)
    agg_calls = sum(e.calls for e in model.estimate(plan).values()) - 1000  # minus the filter's
    # half the rows (the default selectivity) meet almost every group of ten rows
    assert agg_calls == pytest.approx(100 * (1 - 0.5**10), rel=1e-6)
