"""The SEU loop: plan switching under drift, identical results in every mode, progress, streaming."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.errors import PlanError
from duckdb_sem.runtime import MODES, RuntimeOptions, run_query
from duckdb_sem.runtime.entry import prepare, start

# Rows 0-299: most say "superb"; rows 300-599: most say "cheap". A filter on each word flips
# from selective to unselective halfway, so the best order of the two filters flips too.
ROWS = 600
SQL = (
    "SELECT id, sem_map('{text} summarized') AS s FROM r "
    "WHERE sem_filter('{text} sounds superb') AND sem_filter('{text} sounds cheap')"
)


class WordBackend(RuleBackend):
    """Yes iff the text says the template's last word with a '!': "x sounds superb"."""

    def decide(self, row: str, request: object = None) -> bool:
        return row.rsplit(" ", 1)[-1] + "!" in row


@pytest.fixture
def drift(tmp_path: Path) -> Iterator[duckdb_sem.SemConnection]:
    backend = WordBackend(spec="test:words")
    c = duckdb_sem.connect(backend=backend, cache=str(tmp_path / "c.sqlite"))
    c.execute(
        f"CREATE TABLE r AS SELECT i AS id, CASE "
        f"WHEN i < 300 AND i % 10 < 9 THEN 'superb! ' || repeat('word ', i % 7) || i "
        f"WHEN i >= 300 AND i % 10 < 9 THEN 'cheap! ' || repeat('word ', i % 5) || i "
        f"WHEN i % 20 = 9 THEN 'superb! cheap! ' || i ELSE 'plain ' || i END AS text "
        f"FROM range({ROWS}) t(i)"
    )
    yield c
    c.close()


def _options(mode: str, **kw: object) -> RuntimeOptions:
    return RuntimeOptions(mode=mode, batch_rows=50, adapt_batch=False,
                          estimator=WordBackend(spec="test:words"), **kw)  # type: ignore[arg-type]  # fmt: skip


def test_every_mode_returns_the_same_rows(drift: duckdb_sem.SemConnection) -> None:
    drift.optimize = False
    expected = sorted(drift.sql(SQL).fetchall())  # the UDF path, as written
    drift.optimize = True
    assert expected, "the fixture should keep some rows"
    for mode in MODES:
        drift.runtime = _options(mode)
        assert sorted(drift.sql(SQL).fetchall()) == expected, mode


def test_adaptive_switches_plan_when_selectivity_flips(drift: duckdb_sem.SemConnection) -> None:
    con = drift.duckdb
    options = _options("adaptive")
    prepared = prepare(con, SQL, drift.session.engine, options)
    run = start(con, prepared, drift.session.engine, drift.session.new_query(), options)
    rows = sum(b.num_rows for b in run.batches())
    assert rows == 30  # the rows with i % 20 == 9 say both words
    plans = [r.plan for r in run.records]
    assert len(set(plans)) == 2, plans
    assert run.report().switches >= 1
    # every static plan gives the same rows, and the adaptive run costs no more than either
    costs = []
    for i in range(2):
        static = start(con, prepared, drift.session.engine, drift.session.new_query(),
                       _options("static", plan=prepared.choice.ranked[i].plan))  # fmt: skip
        assert sum(b.num_rows for b in static.batches()) == rows
        costs.append(sum(r.actual_cost for r in static.records))
    adaptive = sum(r.actual_cost for r in run.records)
    assert adaptive < min(costs)


def test_progress_is_observable_at_every_boundary(drift: duckdb_sem.SemConnection) -> None:
    con = drift.duckdb
    options = _options("adaptive")
    query = drift.session.new_query()
    run = start(con, prepare(con, SQL, drift.session.engine, options), drift.session.engine,
                query, options)  # fmt: skip
    seen = []
    for _ in run.batches():
        p = run.progress()
        seen.append((p.batches_done, p.rows_done, p.estimated_remaining_cost))
    done = [s for s in seen if s[0] > 0]
    assert [d[0] for d in done] == sorted(d[0] for d in done)
    assert run.progress().finished and run.progress().rows_done == ROWS
    remaining = [r.estimated_remaining for r in run.records]
    assert remaining[0] > remaining[-1] > 0
    assert query.remaining_cost is None  # cleared at the end


def test_scheduler_sees_the_estimated_remaining_cost(drift: duckdb_sem.SemConnection) -> None:
    client = drift.session.engine.client
    submitted: list[float] = []
    real = client.submit

    def submit(seu):  # type: ignore[no-untyped-def]
        submitted.append(seu.remaining_cost)
        return real(seu)

    client.submit = submit  # type: ignore[method-assign]
    drift.runtime = _options("adaptive")
    drift.sql(SQL).fetchall()
    assert submitted and submitted[0] > submitted[-1]


def test_query_progress_on_the_connection(drift: duckdb_sem.SemConnection) -> None:
    assert drift.semantic_progress().batches_done == 0
    drift.runtime = _options("adaptive")
    drift.sql(SQL).fetchall()
    progress = drift.semantic_progress()
    assert progress.finished and progress.batches_done == ROWS // 50 and progress.rows_out == 30


def test_results_stream_lazily(drift: duckdb_sem.SemConnection) -> None:
    drift.execute(
        "CREATE TABLE big AS SELECT i AS id, 'superb! ' || i AS text FROM range(40000) t(i)"
    )
    options = RuntimeOptions(mode="static", batch_rows=1000, adapt_batch=False)
    sql = "SELECT id FROM big WHERE sem_filter('{0} sounds superb', text)"
    reader = run_query(drift, sql, drift.session.engine, drift.session.new_query(), options=options)
    # every row matches: the stream yields the first SEU's 1,000 rows, possibly after an empty
    # batch carrying the schema, long before the 40 SEUs of the whole table have run
    first = reader.read_next_batch().num_rows
    assert first in (0, 1000)
    assert first == 1000 or reader.read_next_batch().num_rows == 1000
    assert drift.semantic_progress().batches_done < 20


def test_temp_tables_fall_back_to_the_main_connection(drift: duckdb_sem.SemConnection) -> None:
    drift.execute("CREATE TEMP TABLE t AS SELECT * FROM r")
    drift.runtime = _options("adaptive")
    got = drift.sql(SQL.replace(" FROM r ", " FROM t ")).fetchall()
    assert len(got) == 30


def test_set_wise_sinks_run_once_at_the_end(drift: duckdb_sem.SemConnection) -> None:
    drift.runtime = _options("adaptive")
    sql = ("SELECT id % 2 AS k, count(*) AS n FROM r WHERE sem_filter('{text} sounds superb') "
           "GROUP BY k ORDER BY k")  # fmt: skip
    drift.optimize = False
    expected = drift.sql(sql).fetchall()
    drift.optimize = True
    assert drift.sql(sql).fetchall() == expected


def test_eddies_needs_one_table(drift: duckdb_sem.SemConnection) -> None:
    drift.execute("CREATE TABLE m AS SELECT i AS id FROM range(3) t(i)")
    con = drift.duckdb
    options = _options("eddies")
    sql = "SELECT r.id FROM r JOIN m ON r.id = m.id WHERE sem_filter('{r.text} sounds superb')"
    prepared = prepare(con, sql, drift.session.engine, options)
    with pytest.raises(PlanError, match="one table"):
        start(con, prepared, drift.session.engine, None, options)


def test_joins_run_batch_by_batch_on_the_largest_table(drift: duckdb_sem.SemConnection) -> None:
    drift.execute("CREATE TABLE m AS SELECT i AS id, 'cheap! m' || i AS note FROM range(40) t(i)")
    sql = ("SELECT r.id FROM r JOIN m ON r.id = m.id WHERE sem_filter('{r.text} sounds superb') "
           "AND sem_filter('{m.note} sounds cheap')")  # fmt: skip
    drift.optimize = False
    expected = sorted(drift.sql(sql).fetchall())
    drift.optimize = True
    drift.runtime = _options("adaptive")
    assert sorted(drift.sql(sql).fetchall()) == expected
    assert drift.semantic_progress().rows_total == ROWS


def test_empty_input_keeps_the_schema(drift: duckdb_sem.SemConnection) -> None:
    drift.runtime = _options("adaptive")
    table = drift.sql(SQL.replace("FROM r WHERE", "FROM r WHERE id < 0 AND")).to_arrow_table()
    assert isinstance(table, pa.Table) and table.num_rows == 0
    assert table.column_names == ["id", "s"]


def test_runtime_options_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from duckdb_sem.config import Settings
    from duckdb_sem.runtime.entry import options_from_settings

    monkeypatch.setenv("DUCKDB_SEM_RUNTIME", "eddies")
    monkeypatch.setenv("DUCKDB_SEM_SEU_ROWS", "32")
    monkeypatch.setenv("DUCKDB_SEM_ESTIMATOR_BACKEND", "test:?yes_if=fine")
    monkeypatch.setenv("DUCKDB_SEM_ESTIMATOR_SAMPLE", "4")
    options = options_from_settings(Settings.from_env())
    assert (options.mode, options.batch_rows, options.sample_rows) == ("eddies", 32, 4)
    assert options.estimator is not None and options.estimator.spec.startswith("test:")


def test_query_memo_is_a_bounded_lru() -> None:
    from duckdb_sem.runtime.context import Memo

    memo = Memo(capacity=3)
    for i in range(10):
        memo[f"k{i}"] = i
    assert len(memo) == 3 and "k9" in memo and "k0" not in memo
    assert memo.get("k7") == 7  # touched: now the most recent
    memo["k10"] = 10
    assert "k7" in memo and "k8" not in memo
