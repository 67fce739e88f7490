"""``EXPLAIN [ANALYZE] SEMANTIC``: what will run, costed with the statistics the run uses.

A planned statement is prepared exactly as a run prepares it (``runtime.entry.prepare``: the
written plan, profiled on a sample of every scan, the equivalent plans ranked with those
statistics), so EXPLAIN shows the plan the first SEU would run, not one ranked with defaults;
the first line says where the statistics came from. A LIMIT the runtime stops at is costed
(only the share of rows it needs). With ``analyze`` the query runs on the SEU loop and every
operator shows what it did, followed by the estimator's report.

A statement the optimizer does not plan (a CTE, an outer join, DDL, ...) runs through DuckDB
with the ``sem_*`` functions where they are written; EXPLAIN then says so, why, and shows
DuckDB's own plan of the statement it will run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from duckdb_sem.errors import PlanError
from duckdb_sem.optimizer.actuals import Actual
from duckdb_sem.optimizer.cost import CostModel
from duckdb_sem.optimizer.explain import explain_choice
from duckdb_sem.runtime.entry import Prepared, options_from_settings, prepare, start
from duckdb_sem.runtime.progress import RuntimeOptions

if TYPE_CHECKING:
    from duckdb_sem.connection import SemConnection

__all__ = ["explain_semantic", "statistics_line"]


def statistics_line(prepared: Prepared, options: RuntimeOptions) -> str:
    """Where the plan's statistics came from, in one line."""
    sample = f"{options.sample_rows} sampled rows per operator"
    if options.estimator is not None:
        how = f"selectivity and tokens from {sample} on {options.estimator.backend_id}"
    else:
        how = (
            "prompt tokens counted on a sample of each scan; selectivities are defaults "
            "(set DUCKDB_SEM_ESTIMATOR_BACKEND to sample them on a small model)"
        )
    return f"statistics: {how}; re-estimated before every SEU as the run observes answers"


def explain_semantic(
    con: SemConnection, sql: str, *, analyze: bool = False, runner_ups: int = 3
) -> str:
    """The text of ``EXPLAIN [ANALYZE] SEMANTIC sql``; with ``analyze`` the query runs."""
    options = con.runtime or options_from_settings(con.settings)
    raw = con.duckdb
    engine = con.session.engine
    query = con.session.new_query()  # the estimator's samples, if any, are this query's
    try:
        prepared = prepare(raw, sql, engine, options, query=query)
    except PlanError as err:
        return _unplanned(con, sql, err)
    model = CostModel(table_rows=prepared.table_rows, stats=prepared.stats)
    head = statistics_line(prepared, options)
    if not analyze:
        return "\n".join([explain_choice(prepared.choice, model, runner_ups=runner_ups), head])
    actuals: dict[tuple[int, ...], Actual] = {}
    run = start(raw, prepared, engine, query, options, actuals=actuals)
    for _ in run.batches():
        pass
    text = explain_choice(prepared.choice, model, runner_ups=runner_ups, actuals=actuals)
    return "\n".join([text, head, *run.report().lines()])


def _unplanned(con: SemConnection, sql: str, err: PlanError) -> str:
    lines = [
        "not planned by the optimizer: " + str(err),
        "DuckDB runs it with the sem_* functions where they are written (same engine, "
        "renderer, cache and scheduler; no reordering, and a LIMIT stops only at DuckDB's "
        "2,048-row vectors)",
        "DuckDB plan:",
    ]
    bound: Any = con._prepare(con._sources.open(sql).sql)
    rows = con.duckdb.execute("EXPLAIN " + bound.sql).fetchall()
    for _, plan in rows:
        lines.extend("  " + line for line in str(plan).splitlines())
    return "\n".join(lines)
