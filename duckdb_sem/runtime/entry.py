"""The one runtime entry point of a planned semantic SELECT: prepare, then run per ``mode``.

``prepare`` builds the written plan, profiles it on the estimator (a sample of every scan
through every operator), and ranks the equivalent plans with the profiled statistics;
``start`` returns the run object of the selected mode; ``run_query`` wraps it in an Arrow
``RecordBatchReader`` that DuckDB reads lazily (``con.from_arrow(reader)``), so results flow
out SEU by SEU and memory stays bounded by a few batches.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa
from sqlglot import exp

from duckdb_sem.backends.base import Backend
from duckdb_sem.backends.registry import create_backend
from duckdb_sem.backends.tokens import estimate_tokens
from duckdb_sem.config import INPROCESS_SCHEDULER, Settings
from duckdb_sem.estimator.accuracy import AccuracyReport, BatchRecord
from duckdb_sem.estimator.profile import Profiler, TokenCounter
from duckdb_sem.estimator.stats import StatsStore
from duckdb_sem.optimizer import optimize
from duckdb_sem.optimizer.choose import Choice, plan_key
from duckdb_sem.optimizer.cost import Statistics
from duckdb_sem.plan.build import build_plan
from duckdb_sem.plan.nodes import Node, SemFilter, SemJoin
from duckdb_sem.runtime.approximation import approximation_of
from duckdb_sem.runtime.blocking import block_sem_joins
from duckdb_sem.runtime.cascade import cascade_sem_operators
from duckdb_sem.runtime.cascade_helpers import choose_helper
from duckdb_sem.runtime.estimator_work import scheduled_samples
from duckdb_sem.runtime.execute_plan import Actual, Evaluator, Path
from duckdb_sem.runtime.progress import QueryProgress, RuntimeOptions
from duckdb_sem.runtime.seu_loop import QueryRun
from duckdb_sem.scheduler.seu import SchedulerClient
from duckdb_sem.scheduler.shared import scheduler_for

__all__ = [
    "Prepared",
    "Run",
    "options_from_settings",
    "prepare",
    "run_prepared",
    "run_query",
    "start",
    "written_plan",
]


class Run(Protocol):
    """What every mode's run object offers (the SEU loop and each baseline)."""

    records: list[BatchRecord]

    def batches(self) -> Iterator[pa.RecordBatch]: ...
    def progress(self) -> QueryProgress: ...
    def report(self) -> AccuracyReport: ...


@dataclass(frozen=True)
class Prepared:
    written: Node
    choice: Choice
    table_rows: dict[str, float]
    profiler: Profiler
    store: StatsStore
    profile_seconds: float
    stats: dict[str, Statistics]  # what the profile measured (the store moves on from there)


class _Words:
    def count_tokens(self, text: str) -> int:
        return estimate_tokens(text)


def target_backend(engine: Any) -> Any:
    """The target backend behind an engine's scheduler client (None through a sidecar)."""
    backends = getattr(getattr(engine, "client", None), "backends", None)
    return backends[0] if backends else None


def model_backends(engine: Any) -> dict[str, Any]:
    """The backend of each named model of an engine (by name), where it runs in process."""
    models = getattr(engine, "models", None)
    if models is None:
        return {}
    found = {name: models.backend(name) for name in models.names()[1:]}
    return {name: backend for name, backend in found.items() if backend is not None}


def written_plan(con: Any, sql: str | exp.Expr) -> Node:
    """The plan of ``sql`` as written (``PlanError`` for a shape the optimizer does not plan);
    nothing runs but DuckDB's ``LIMIT 0`` descriptions of the tables it reads."""
    raw = getattr(con, "duckdb", con)

    def columns(table: str) -> list[str]:
        cols: list[str] = raw.sql(f"SELECT * FROM {table} LIMIT 0").columns
        return cols

    return build_plan(sql, columns)


def prepare(
    con: Any,
    sql: str,
    engine: Any,
    options: RuntimeOptions,
    *,
    query: Any = None,
    written: Node | None = None,
    again: Prepared | None = None,
) -> Prepared:
    """The written plan (``written``, when the caller built it already), profiled (samples
    through the estimator's scheduler as SEUs of ``query`` when the options carry one), and
    the equivalent plans ranked on the profile. ``again``: what an earlier run of the same
    statement prepared (its plans, ranking and profile are reused: a repeated statement is
    not profiled again; lossy plans, which sample each query, are always prepared anew)."""
    raw = getattr(con, "duckdb", con)
    if written is None:
        written = written_plan(raw, sql)
    target = target_backend(engine)
    counter: TokenCounter = target if target is not None else _Words()
    via = None
    if options.estimator is not None and options.estimator_client is not None:
        via = scheduled_samples(options.estimator_client, query)
    profiler = Profiler(counter, options.estimator, sample_rows=options.sample_rows,
                        seed=options.seed, via=via,
                        targets=model_backends(engine))  # fmt: skip
    approximation = options.approximation
    lossy = approximation is not None and approximation.allowed
    if again is not None and not lossy:
        store = StatsStore()
        store.seed(again.stats)
        return Prepared(again.written, again.choice, again.table_rows, profiler, store, 0.0,
                        again.stats)  # fmt: skip
    profile = profiler.profile_plan(raw, written)
    if approximation is not None and approximation.allowed and query is not None:
        written = block_sem_joins(raw, written, engine, query, approximation)  # lossy, opt-in
        if any(isinstance(n, SemFilter | SemJoin) for n in written.walk()):
            helper = choose_helper(options.filter_helper, estimator=options.estimator_client,
                                   named=options.helper_client, engine=engine)  # fmt: skip
            written = cascade_sem_operators(raw, written, engine, query, helper, approximation)
    choice, model = optimize(raw, sql, stats=profile.stats, written=written)
    store = StatsStore()
    store.seed(profile.stats)
    return Prepared(written, choice, dict(model.table_rows), profiler, store, profile.seconds,
                    dict(profile.stats))  # fmt: skip


def start(
    con: Any,
    prepared: Prepared,
    engine: Evaluator,
    query: Any,
    options: RuntimeOptions,
    *,
    actuals: dict[Path, Actual] | None = None,
) -> Run:
    """The run object for ``options.mode`` (nothing has run yet)."""
    raw = getattr(con, "duckdb", con)
    plans = [r.plan for r in prepared.choice.ranked[: options.max_candidates]]
    clock = target_backend(engine)
    clock = clock if hasattr(clock, "virtual_seconds") else None
    common: dict[str, Any] = dict(
        options=options, profiler=prepared.profiler, table_rows=prepared.table_rows,
        store=prepared.store, target_clock=clock,
    )  # fmt: skip
    run: Run
    if options.mode in ("adaptive", "static"):
        fixed = None
        if options.mode == "static":
            keys = [plan_key(p) for p in plans]
            wanted = options.plan if options.plan is not None else plans[0]
            if plan_key(wanted) not in keys:
                plans.append(wanted)
                keys.append(plan_key(wanted))
            fixed = keys.index(plan_key(wanted))
        loop = QueryRun(raw, plans, engine, query, fixed=fixed, actuals=actuals, **common)
        loop.profile_seconds = prepared.profile_seconds
        run = loop
    elif options.mode == "static-best":
        from duckdb_sem.runtime.baselines.static_best import StaticBest

        run = StaticBest(raw, plans, engine, query, **common)
    elif options.mode == "eddies":
        from duckdb_sem.runtime.baselines.eddies import EddyRun

        run = EddyRun(raw, prepared.written, engine, query, **common)
    else:
        from duckdb_sem.runtime.baselines.lotus_like import LotusRun

        run = LotusRun(raw, prepared.written, engine, query, target_clock=clock)
    return run


_estimators: dict[str, tuple[Backend, SchedulerClient]] = {}
_estimators_lock = threading.Lock()


def options_from_settings(settings: Settings | None) -> RuntimeOptions:
    """Options from ``Settings`` (the ``DUCKDB_SEM_RUNTIME``/``SEU_ROWS``/``ESTIMATOR_*``
    variables); the estimator backend is built once per spec and process."""
    if settings is None:
        return RuntimeOptions()
    estimator = client = helper = None
    if settings.estimator_backend:
        estimator, client = _small_model(settings, settings.estimator_backend)
    if settings.filter_helper not in ("auto", "estimator", "embed"):  # the cascade's own model
        helper = _small_model(settings, settings.filter_helper)[1]
    return RuntimeOptions(
        approximation=approximation_of(settings),
        filter_helper=settings.filter_helper,
        mode=settings.runtime,
        batch_rows=settings.seu_rows,
        estimator=estimator,
        estimator_client=client,
        helper_client=helper,
        sample_rows=settings.estimator_sample,
    )


def _small_model(settings: Any, spec: str) -> tuple[Backend, SchedulerClient]:
    """The backend of ``spec`` and its scheduler, built once per spec and process."""
    with _estimators_lock:
        if spec not in _estimators:
            backend = create_backend(spec)
            own = dataclasses.replace(settings, backend=spec, scheduler_url=INPROCESS_SCHEDULER)
            _estimators[spec] = (backend, scheduler_for(own, backend))
        return _estimators[spec]


def run_query(
    con: Any,
    sql: str,
    engine: Any,
    query: Any,
    *,
    options: RuntimeOptions | None = None,
    written: Node | None = None,
) -> pa.RecordBatchReader:
    """Run a semantic SELECT; the result streams as Arrow batches, SEU by SEU.

    Everything runs on ``con``, the session's own connection (its transaction, TEMP tables
    and settings): the driving scan is read a window at a time between SEUs
    (:mod:`.windows`), so the reader must be read from Python, never by a DuckDB scan on the
    same connection. The first SEU runs now (the result's schema); the rest as it is read.
    """
    options = options or options_from_settings(getattr(con, "settings", None))
    raw = getattr(con, "duckdb", con)
    prepared = prepare(raw, sql, engine, options, query=query, written=written)
    return run_prepared(raw, prepared, engine, query, options)


def run_prepared(
    con: Any, prepared: Prepared, engine: Any, query: Any, options: RuntimeOptions
) -> pa.RecordBatchReader:
    """:func:`run_query` of a statement :func:`prepare` d already."""
    raw = getattr(con, "duckdb", con)
    run = start(raw, prepared, engine, query, options)
    if query is not None:
        query.run = run
    batches = run.batches()
    first = next(batches)

    def rest() -> Iterator[pa.RecordBatch]:
        yield first
        yield from batches

    return pa.RecordBatchReader.from_batches(first.schema, rest())
