"""Run one query of the set on duckdb-sem with a chosen runtime mode, and record its trace.

``run_query`` loads the query's tables into a fresh ``duckdb_sem.connect()``, runs it on a
SIMULATED Qwen3-32B (the label oracle) with the estimator as a SIMULATED Qwen3-4B, and returns
the answer's accuracy, LLM usage, SIMULATED time, and the *trace*: the sequence of SEUs the
engine sent to the scheduler (each a list of requests with their completions), with the
estimator's time between them. ``bench_arrival`` replays these traces under load.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb

import duckdb_sem
from duckdb_sem.backends.base import Backend, Capacity, Load
from duckdb_sem.backends.sim import SimBackend
from duckdb_sem.llm.request import Completion, LLMRequest
from duckdb_sem.plan.build import build_plan
from duckdb_sem.plan.nodes import Node
from duckdb_sem.runtime import RuntimeOptions

from .oracle import DATA, WorkloadOracle
from .queries import Query
from .sim_profiles import ESTIMATOR_PROFILE, TARGET_PROFILE

__all__ = ["Outcome", "Step", "accuracy", "load_tables", "run_query", "written_plan"]


@dataclass(frozen=True)
class Step:
    """One SEU of a trace: requests answered on the target, or estimator time (``delay``)."""

    requests: tuple[LLMRequest, ...] = ()
    completions: tuple[Completion, ...] = ()
    delay: float = 0.0


@dataclass
class Outcome:
    query: str
    mode: str
    seconds: float  # SIMULATED target busy time, single query on an idle deployment
    estimator_seconds: float
    calls: int
    prompt_tokens: int
    completion_tokens: int
    rows: int
    f1: float
    plan_switches: int = 0
    trace: list[Step] = field(default_factory=list)
    plans: list[Node] = field(default_factory=list)  # the candidates the runtime considered

    def row(self) -> dict[str, Any]:
        return {
            "query": self.query, "mode": self.mode,
            "sim_seconds": round(self.seconds + self.estimator_seconds, 3),
            "estimator_s": round(self.estimator_seconds, 3), "llm_calls": self.calls,
            "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
            "rows": self.rows, "f1": round(self.f1, 3), "plan_switches": self.plan_switches,
        }  # fmt: skip


class Recorder(Backend):
    """Wraps a backend and appends every ``complete`` call to a shared trace."""

    def __init__(self, inner: SimBackend, trace: list[Step], *, delay: bool = False) -> None:
        self.inner = inner
        self.trace = trace
        self.as_delay = delay
        self.simulated = True
        self.spec = inner.spec
        self._lock = threading.Lock()

    @property
    def backend_id(self) -> str:
        return self.inner.backend_id

    @property
    def virtual_seconds(self) -> float:
        return self.inner.virtual_seconds

    def complete(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        before = self.inner.virtual_seconds
        out = self.inner.complete(requests)
        with self._lock:
            if self.as_delay:
                self.trace.append(Step(delay=self.inner.virtual_seconds - before))
            else:
                self.trace.append(Step(tuple(requests), tuple(out)))
        return out

    def capacity(self) -> Capacity:
        return self.inner.capacity()

    def load(self) -> Load:
        return self.inner.load()

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)

    def describe(self) -> str:
        return self.inner.describe()

    def close(self) -> None:
        self.inner.close()


def row_limit() -> int | None:
    """``BENCH_ROW_LIMIT``: keep the first N rows of every table (small real-model runs)."""
    value = os.environ.get("BENCH_ROW_LIMIT", "")
    return int(value) if value else None


def load_tables(con: Any, tables: Sequence[str]) -> None:
    limit = row_limit()
    clause = f" LIMIT {limit}" if limit else ""
    for table in tables:
        path = (DATA / f"{table}.csv").as_posix()
        con.execute(f"CREATE OR REPLACE TABLE {table} AS SELECT * FROM read_csv('{path}'){clause}")


def written_plan(query: Query, sql: str) -> Node:
    probe = duckdb.connect()
    load_tables(probe, query.tables)

    def columns(table: str) -> list[str]:
        cols: list[str] = probe.sql(f"SELECT * FROM {table} LIMIT 0").columns
        return cols

    return build_plan(sql, columns)


def accuracy(got: set[tuple[Any, ...]], truth: set[tuple[Any, ...]]) -> float:
    """F1 of the result rows against the true rows (1.0 when both are empty)."""
    if not got and not truth:
        return 1.0
    hit = len(got & truth)
    return 2 * hit / (len(got) + len(truth)) if got or truth else 1.0


def truth_rows(query: Query) -> set[tuple[Any, ...]]:
    con = duckdb.connect()
    load_tables(con, query.tables)
    rel = con.sql(query.truth)
    cols = [rel.columns.index(k) for k in query.key]
    return {tuple(str(r[i]) for i in cols) for r in rel.fetchall()}


def run_query(
    query: Query,
    mode: str,
    *,
    plan: Node | None = None,
    batch_rows: int = 128,
    sample_rows: int = 8,
    noise: float = 0.0,
) -> Outcome:
    """Run ``query`` once; ``mode`` is a runtime mode, ``plan`` a fixed plan for ``static``."""
    oracle = WorkloadOracle(noise=noise)
    trace: list[Step] = []
    target = Recorder(SimBackend(TARGET_PROFILE, oracle=oracle, spec="sim:target"), trace)
    slm = SimBackend(ESTIMATOR_PROFILE, oracle=WorkloadOracle(noise=max(noise, 0.1)),
                     spec="sim:estimator")  # fmt: skip
    estimator = Recorder(slm, trace, delay=True)
    con = duckdb_sem.connect(backend=target, cache="off", batch_size=128)
    load_tables(con.duckdb, query.tables)
    adaptive = mode == "adaptive"
    con.runtime = RuntimeOptions(
        mode=mode, batch_rows=batch_rows, adapt_batch=False, plan=plan,
        estimator=estimator if adaptive else None, sample_rows=sample_rows,
    )  # fmt: skip
    rel = con.sql(query.sql)
    rows = rel.fetchall()
    cols = [rel.columns.index(k) for k in query.key]
    got = {tuple(str(r[i]) for i in cols) for r in rows}
    stats = con.stats()
    run = getattr(con.session.query, "run", None)
    progress = run.progress() if run is not None and hasattr(run, "progress") else None
    plans = list(getattr(run, "plans", []) or [])
    con.close()
    return Outcome(
        query.name, mode, target.virtual_seconds, slm.virtual_seconds,
        stats.physical_calls, stats.physical_prompt_tokens, stats.physical_completion_tokens,
        len(rows), accuracy(got, truth_rows(query)),
        progress.plan_switches if progress is not None else 0, trace, plans,
    )  # fmt: skip
