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

from duckdb_sem.backends.base import plain_chat
from duckdb_sem.errors import PlanError
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.render import render_column
from duckdb_sem.llm.request import LLMRequest
from duckdb_sem.llm.template import parse_template
from duckdb_sem.optimizer.actuals import Actual
from duckdb_sem.optimizer.cost import CostModel
from duckdb_sem.optimizer.explain import explain_choice
from duckdb_sem.plan.nodes import Node, Scan, SemCall, quote
from duckdb_sem.runtime.entry import (
    Prepared,
    options_from_settings,
    prepare,
    start,
    target_backend,
)
from duckdb_sem.runtime.plan_sql import scan_sql
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
    con: SemConnection,
    sql: str,
    *,
    analyze: bool = False,
    verbose: bool = False,
    runner_ups: int = 3,
) -> str:
    """The text of ``EXPLAIN [ANALYZE] SEMANTIC [VERBOSE] sql``; with ``analyze`` the query
    runs; with ``verbose`` the prompts of each operator's first row follow the plan."""
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
    prompts = prompt_lines(con, prepared.choice.best.plan) if verbose else []
    if not analyze:
        text = explain_choice(prepared.choice, model, runner_ups=runner_ups)
        return "\n".join([text, head, *prompts])
    actuals: dict[tuple[int, ...], Actual] = {}
    run = start(raw, prepared, engine, query, options, actuals=actuals)
    for _ in run.batches():
        pass
    text = explain_choice(prepared.choice, model, runner_ups=runner_ups, actuals=actuals)
    return "\n".join([text, head, *run.report().lines(), *prompts])


def prompt_lines(con: SemConnection, plan: Node) -> list[str]:
    """What each semantic operator of ``plan`` asks for its first row: the backend, the
    decoding parameters, the output, and the chat as the backend sends it."""
    backend = target_backend(con.session.engine)
    lines = ["prompts (the first row of each operator):"]
    for node in plan.walk():
        call: SemCall | None = getattr(node, "call", None)
        if call is None:
            continue
        request = _first_request(con, plan, call)
        lines.append(f"  {node.label()}")
        if request is None:
            lines.append("    (no row: its input is empty, or the first row has a NULL input)")
            continue
        where = backend.describe() if backend is not None else "the scheduler sidecar"
        p = request.params
        labels = f" one of {list(request.output.labels)}" if request.output.labels else ""
        lines.append(f"    backend: {where}")
        lines.append(
            f"    decoding: max_tokens={p.max_tokens} temperature={p.temperature} seed={p.seed}; "
            f"output: {request.output.task.value} {request.output.sql_type}{labels}"
        )
        chat = backend.messages(request) if backend is not None else plain_chat(request)
        for message in chat:
            text = message["content"].replace("\n", "\n      ")
            lines.append(f"    [{message['role']}] {text}")
    return lines


def _first_request(con: SemConnection, plan: Node, call: SemCall) -> LLMRequest | None:
    """The request ``call`` makes for the first row of its scans (a map output it reads is
    shown as a placeholder)."""
    scans = {a: n for n in plan.walk() if isinstance(n, Scan) for a in n.produces}
    values: list[str] = []
    for attr in call.args:
        scan = scans.get(attr)
        if scan is None:
            values.append(f"<{attr}: computed by an operator below>")
            continue
        sql = f"SELECT {quote(attr)} FROM ({scan_sql(scan)}) LIMIT 1"
        column = con.duckdb.sql(sql).to_arrow_table().column(0)
        rendered = render_column(column)
        if not rendered or rendered[0] is None:
            return None
        values.append(rendered[0])
    template = parse_template(call.template)
    return build_request(call.kind, template.render(values), output_type=call.output_type,
                         template=template, labels=call.labels)  # fmt: skip


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
