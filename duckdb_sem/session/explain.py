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

A call on a named model shows it in its operator's label (``model := 'fast'``), and a
``models:`` line says which backend each model the plan uses is.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator, Sequence
from typing import Any

from duckdb_sem.backends.base import plain_chat
from duckdb_sem.llm.closed import describe
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.render import render_column
from duckdb_sem.llm.request import LLMRequest
from duckdb_sem.llm.template import parse_template
from duckdb_sem.optimizer.actuals import Actual
from duckdb_sem.optimizer.cost import CostModel, Estimate, Path
from duckdb_sem.optimizer.explain import explain_choice
from duckdb_sem.optimizer.spend import Price, Spend, format_dollars, spend_lines, total
from duckdb_sem.plan.nodes import Node, Scan, SemCall, quote
from duckdb_sem.runtime.dry_run import DRY_RUN_NOTE
from duckdb_sem.runtime.entry import (
    Prepared,
    prepare,
    start,
)
from duckdb_sem.runtime.money import model_price
from duckdb_sem.runtime.plan_sql import scan_sql
from duckdb_sem.runtime.progress import RuntimeOptions
from duckdb_sem.session.protocol import Session
from duckdb_sem.session.statements import Planned, Route, registered
from duckdb_sem.session.transaction import StatementTransaction

__all__ = ["actual_line", "estimate_lines", "explain_semantic", "models_line", "statistics_line"]


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
    con: Session,
    sql: str,
    *,
    analyze: bool = False,
    verbose: bool = False,
    runner_ups: int = 3,
) -> str:
    """The text of ``EXPLAIN [ANALYZE] SEMANTIC [VERBOSE] sql``; with ``analyze`` the query
    runs; with ``verbose`` the prompts of each operator's first row follow the plan."""
    options = con.runtime_options()
    raw = con.duckdb
    statement = con.sources.open(sql)
    notes = list(statement.notes)  # what its table functions say (a ranking's call bound)
    route = con.route(statement, None)  # the front end a run goes through
    if route.planned is None:
        return _unplanned(con, sql, route.sql, route.why, analyze=analyze, notes=notes)
    planned = route.planned
    road = "road: planned by the optimizer" + (
        f" ({'; '.join(route.notes)})" if route.notes else ""
    )
    road = "\n".join([road, *notes])
    if planned.units or route.write is not None or planned.plan is None:
        return _explain_parts(con, route, road, analyze=analyze, verbose=verbose)
    query = con.session.query  # the estimator's samples, if any, are this query's
    con.discard_results()
    transaction = StatementTransaction(raw)
    try:
        text = _explain_one(con, planned.sql, planned.plan, query, options, road,
                            analyze=analyze, verbose=verbose, runner_ups=runner_ups)  # fmt: skip
    except BaseException as err:
        transaction.fail(err)
        raise
    transaction.commit()
    return text


def _explain_one(
    con: Session, sql: str, plan: Node, query: Any, options: RuntimeOptions, road: str,
    *, analyze: bool, verbose: bool, runner_ups: int = 3,
) -> str:  # fmt: skip
    """The explanation of one planned SELECT (``plan``: its written plan)."""
    raw, engine = con.duckdb, con.session.engine
    prepared = prepare(raw, sql, engine, options, query=query, written=plan)
    model = CostModel(table_rows=prepared.table_rows, stats=prepared.stats)
    head = statistics_line(prepared, options)
    spend = estimate_lines(
        con, prepared.choice.best.plan, model.estimate(prepared.choice.best.plan)
    )
    named = models_line(con, prepared.choice.best.plan)
    if named:
        head += "\n" + named
    if query.declined:  # approximation allowed, and an approximate plan was not taken
        head += "\napproximate plans not taken:" + "".join(f"\n  {d}" for d in query.declined)
    prompts = prompt_lines(con, prepared.choice.best.plan) if verbose else []
    if not analyze:
        text = explain_choice(prepared.choice, model, runner_ups=runner_ups)
        return "\n".join([text, *spend, road, head, *prompts])
    actuals: dict[tuple[int, ...], Actual] = {}
    started = time.perf_counter()
    run = start(raw, prepared, engine, query, options, actuals=actuals)
    for _ in run.batches():
        pass
    done = actual_line(con, query.stats(), time.perf_counter() - started)
    text = explain_choice(prepared.choice, model, runner_ups=runner_ups, actuals=actuals)
    return "\n".join([text, *_beside(spend, done), road, head, *run.report().lines(), *prompts])


def _beside(estimated: list[str], actual: str) -> list[str]:
    """The ``actual:`` line right under the ``estimated:`` one."""
    at = next((i + 1 for i, line in enumerate(estimated) if line.startswith("estimated:")), 0)
    return [*estimated[:at], actual, *estimated[at:]]


def actual_line(con: Session, stats: Any, seconds: float) -> str:
    """What a run did, to read under ``estimate_lines``: the calls (as if nothing were
    cached, as estimated; then how they were served), the prompt and completion tokens asked
    and sent to a backend (and how many of those prompt tokens the backend's KV or prefix
    cache held), the wall time and, when a price is set, the money spent (each backend's
    reported tokens at its model's price, ``QueryStats.cost_usd``)."""
    s = stats
    line = (
        f"actual: calls {s.llm_calls:,} ({s.physical_calls:,} to a backend, {s.cache_hits:,} "
        f"cached, {s.fused:,} fused, {s.deduplicated:,} repeated in the query)  tokens "
        f"{s.prompt_tokens:,} prompt + {s.completion_tokens:,} completion asked, "
        f"{s.physical_prompt_tokens:,} + {s.physical_completion_tokens:,} sent"
    )
    if s.physical_prompt_tokens:
        line += (f" ({s.physical_cached_tokens:,} prompt tokens from the backend's prefix cache, "
                 f"{s.prefix_hit_rate:.0%})")  # fmt: skip
    line += f"  wall {seconds:,.2f} s"
    if s.cost_usd or _price(con, None) is not None:
        line += f"  money {format_dollars(s.cost_usd)}"
    return line


def _explain_parts(con: Session, route: Route, road: str, *, analyze: bool, verbose: bool) -> str:
    """A planned statement of several parts: the units computed first, each with its plan
    (estimated over placeholders of the units it reads), then its SELECT, then its write."""
    assert route.planned is not None
    raw = con.duckdb
    options = dataclasses.replace(con.runtime_options(), approximation=None)
    lines = [road]
    con.discard_results()
    transaction = StatementTransaction(raw)
    try:
        with registered(raw, con.placeholders(route.planned)):
            for name, part in _parts(route.planned):
                title = f"unit {name}, computed first:" if name else "then the statement:"
                lines.append(title)
                if part.plan is None:
                    lines.append(f"  DuckDB runs it over the units' rows: {part.sql}")
                    continue
                text = _explain_one(con, part.sql, part.plan, con.session.query, options, "",
                                    analyze=False, verbose=verbose)  # fmt: skip
                lines += ["  " + line for line in text.splitlines() if line]
    finally:
        transaction.commit()
    if route.write is not None:
        lines.append(f"its rows are written batch by batch: {route.write.first}")
    if analyze:
        lines.append(_actual_line(con, route.statement))
    return "\n".join(lines)


def _parts(planned: Planned) -> list[tuple[str, Planned]]:
    """The units (by name, in the order they run), then the statement itself (no name)."""
    return [*planned.units_in_order(), ("", planned)]


def estimate_lines(con: Session, plan: Node, estimates: dict[Path, Estimate]) -> list[str]:
    """The plan's estimated calls and tokens, time on each model's backend (from its
    throughput figure) and, when a price is configured, money."""
    by_model: dict[str | None, list[Estimate]] = {}
    for path, node in _walk(plan, ()):
        call: SemCall | None = getattr(node, "call", None)
        name = call.options.model_name if call is not None else None
        by_model.setdefault(None if name == "default" else name, []).append(estimates[path])
    return spend_by_model(con, {name: total(items) for name, items in by_model.items()})


def spend_by_model(con: Session, spend: dict[str | None, Spend]) -> list[str]:
    """The ``estimated:`` line of the summed ``spend``, a ``time`` line per model (``None``:
    the default) and the money line: each model at its own price (``?price_in=&price_out=``
    in its spec), else at the connection's (``price_per_mtok_in/_out``)."""
    lines = spend_lines(total(spend.values()), backend="", throughput=None)[:1]
    used = sorted(
        ((n, s) for n, s in spend.items() if n is None or s.calls),
        key=lambda kv: (kv[0] is not None, kv[0] or ""),
    )
    priced: list[tuple[str, Spend, Price | None]] = []
    for name, model_spend in used:
        backend = con.models.backend(name)
        label = backend.spec if backend is not None else "the scheduler sidecar"
        if name is not None:
            label = f"model {name} ({label})"
        replicas = len(getattr(con.models.client(name), "backends", None) or [None])
        lines.append(
            spend_lines(model_spend, backend=label, replicas=replicas,
                        throughput=backend.throughput() if backend is not None else None)[1]
        )  # fmt: skip
        priced.append((name or "default", model_spend, _price(con, name)))
    return [*lines, *_money_lines(priced)]


def _price(con: Session, name: str | None) -> Price | None:
    """Model ``name``'s price: its spec's, else the connection's, else None."""
    return model_price(con.models, name, con.settings)


def _money_lines(priced: list[tuple[str, Spend, Price | None]]) -> list[str]:
    """One money line for one model; for several, the total and a line per model."""
    if len(priced) > 1:
        priced = [p for p in priced if p[1].calls] or priced[:1]
    if all(price is None for _, _, price in priced):
        return []
    if len(priced) == 1:
        _, spend, price = priced[0]
        return spend_lines(spend, backend="", throughput=None, price=price)[2:]
    parts = []
    dollars = 0.0
    for name, spend, price in priced:
        if price is None:
            parts.append(f"  {name}: no price (add ?price_in=...&price_out=... to its spec)")
            continue
        line = spend_lines(spend, backend="", throughput=None, price=price)[2]
        dollars += price.dollars(spend.prompt_tokens, spend.completion_tokens)
        parts.append(f"  {name}: {line}")
    unpriced = any(price is None for _, _, price in priced)
    head = f"money≈{format_dollars(dollars)}" + (" for the priced models" if unpriced else "")
    return [head, *parts]


def _walk(node: Node, path: Path) -> Iterator[tuple[Path, Node]]:
    yield path, node
    for i, child in enumerate(node.children):
        yield from _walk(child, (*path, i))


def models_line(con: Session, plan: Node) -> str:
    """``models: default = ..., fast = ...`` for a plan with a call on a named model, else ''."""
    names = {c.options.model_name for n in plan.walk() if (c := getattr(n, "call", None))}
    if names <= {None, "default"}:
        return ""
    shown = []
    for name in sorted(names, key=lambda m: (m is not None, m or "")):
        backend = con.models.backend(name)
        where = backend.describe() if backend is not None else con.models.client(name).backend_id
        shown.append(f"{name or 'default'} = {where}")
    return "models: " + "; ".join(shown)


def prompt_lines(con: Session, plan: Node) -> list[str]:
    """What each semantic operator of ``plan`` asks for its first row: the model's backend,
    the decoding parameters, the output, and the chat as the backend sends it."""
    lines = ["prompts (the first row of each operator):"]
    for node in plan.walk():
        call: SemCall | None = getattr(node, "call", None)
        if call is None:
            continue
        backend = con.models.backend(call.options.model)
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
        closed = describe(request.output)
        if closed is not None:
            lines.append(f"    {closed}")
        chat = backend.messages(request) if backend is not None else plain_chat(request)
        for message in chat:
            text = message["content"].replace("\n", "\n      ")
            lines.append(f"    [{message['role']}] {text}")
    return lines


def _first_request(con: Session, plan: Node, call: SemCall) -> LLMRequest | None:
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
                         template=template, options=call.options,
                         labels=call.labels)  # fmt: skip


def _unplanned(
    con: Session, sql: str, bound_sql: str, why: str, *, analyze: bool = False,
    notes: Sequence[str] = (),
) -> str:  # fmt: skip
    """``bound_sql``: the statement as the UDF path runs it; its spend comes from a dry run
    of ``sql`` (:mod:`duckdb_sem.runtime.dry_run`), then ``notes`` (its table functions'
    lines). With ``analyze`` the statement then runs for real (as in Postgres, a write is
    done) and what it asked is added."""
    lines = [
        "not planned by the optimizer: " + why,
        "DuckDB runs it with the sem_* functions where they are written (same engine, "
        "renderer, cache and scheduler; no reordering, and a LIMIT stops only at DuckDB's "
        "2,048-row vectors)",
    ]
    dry = con.dry_run(sql)
    if dry.refused is not None:
        lines.append(f"estimated: not available ({dry.refused})")
    else:
        lines += spend_by_model(con, dry.spend)
        lines.append(f"{DRY_RUN_NOTE} ({dry.seconds:.2f} s)")
    lines += notes
    lines.append("DuckDB plan:")
    rows = con.duckdb.execute("EXPLAIN " + bound_sql).fetchall()
    for _, plan in rows:
        lines.extend("  " + line for line in str(plan).splitlines())
    if analyze:
        lines.append(_actual_line(con, sql))
    return "\n".join(lines)


def _actual_line(con: Session, sql: str) -> str:
    """Run ``sql`` on ``con`` to its last row and say what it asked the models."""
    started = time.perf_counter()
    con.run_to_end(sql)
    return actual_line(con, con.stats(), time.perf_counter() - started)
