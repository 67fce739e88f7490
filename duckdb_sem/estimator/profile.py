"""Sampling profiler: representative rows through each semantic operator on a small model.

The *estimator* backend (a small model, e.g. the embedded one in front of a vLLM target) answers
a few sampled rows per operator; from its answers come the selectivity of filters and joins and
the length of generated values. Token counts are taken under the *target* backend's tokenizer
(``target.count_tokens``), since the cost that matters is the target's: prompt tokens are
counted exactly on the rendered rows, completion tokens on the small model's answers. An
operator whose call names a model (``model := 'big'``) is counted under that model's tokenizer
(``targets``), and its statistics are its own (the operator signature includes the model).

Two entry points:

- :meth:`Profiler.profile_plan` before a query runs: samples every scan (DuckDB's reservoir
  sample) and pushes the sample through each operator of the plan (``sem_map`` outputs first,
  for the operators that read them; a cross-table call gets pairs of the two samples);
- :meth:`Profiler.profile_batch` before each SEU: the prompt tokens of the operators that read
  only the driving table are counted on the upcoming batch itself (no LLM), and those whose
  statistics are in doubt are sampled on it, so a batch whose selectivity or cost flipped is
  estimated as it is, not as the previous one was.

The estimator's own LLM time is accumulated in :attr:`Profiler.seconds` (the simulated clock
for a SIMULATED estimator, wall time otherwise) so every end-to-end figure can include it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa

from duckdb_sem.backends.base import Backend
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.render import render_column
from duckdb_sem.llm.request import Completion, LLMRequest, OperatorKind
from duckdb_sem.llm.template import parse_template
from duckdb_sem.optimizer.cost import CostModel, Statistics, operator_signature
from duckdb_sem.plan.nodes import Node, Scan, SemCall, SemFilter, SemJoin, SemMap, quote

__all__ = ["ProfileResult", "Profiler", "TokenCounter", "semantic_calls"]


class TokenCounter(Protocol):
    """The target's tokenizer (every :class:`~duckdb_sem.backends.base.Backend` is one)."""

    def count_tokens(self, text: str) -> int: ...


@dataclass(frozen=True, slots=True)
class ProfileResult:
    """Statistics per operator signature, and what measuring them cost."""

    stats: dict[str, Statistics]
    seconds: float
    calls: int


def semantic_calls(plan: Node) -> list[Node]:
    """Row-wise semantic operators of ``plan``, children before parents."""
    out: list[Node] = []

    def walk(node: Node) -> None:
        for child in node.children:
            walk(child)
        if isinstance(node, SemFilter | SemMap | SemJoin):
            out.append(node)

    walk(plan)
    return out


class Profiler:
    """Samples operators on ``estimator`` (None: count prompt tokens only, no LLM calls)."""

    def __init__(
        self,
        target: TokenCounter,
        estimator: Backend | None = None,
        *,
        sample_rows: int = 8,
        seed: int = 7,
        via: Callable[[Sequence[LLMRequest]], list[Completion]] | None = None,
        targets: Mapping[str, TokenCounter] | None = None,
    ) -> None:
        self.target = target
        #: the tokenizer of each named model (by name); a call on another model uses ``target``
        self.targets = dict(targets or {})
        self.estimator = estimator
        # how samples reach the estimator: through its scheduler (the runtime's), else directly
        self.via = via
        self.sample_rows = sample_rows
        self.seed = seed
        self.seconds = 0.0  # the estimator's LLM time so far
        self.calls = 0
        self._lock = threading.Lock()
        self._prefix_tokens: dict[tuple[int, str], int] = {}

    def counter(self, call: SemCall) -> TokenCounter:
        """The tokenizer of the model ``call`` runs on."""
        return self.targets.get(call.options.model_name or "", self.target)

    # -- one call over arrays ----------------------------------------------------------------
    def measure(
        self, call: SemCall, args: Sequence[pa.Array], *, sample: bool = True
    ) -> tuple[Statistics, list[Any]] | None:
        """Statistics of ``call`` over the rows of ``args`` (all rows for prompt tokens, a
        sample of ``sample_rows`` through the estimator), and the sampled answers."""
        return self.measure_many([(call, args)], sample=sample)[0]

    def measure_many(
        self, items: Sequence[tuple[SemCall, Sequence[pa.Array]]], *, sample: bool = True
    ) -> list[tuple[Statistics, list[Any]] | None]:
        """:meth:`measure` for several calls, their samples sent to the estimator together
        (one batch: a small model's time is mostly per step, not per request)."""
        prepared: list[tuple[SemCall, float, list[LLMRequest]] | None] = []
        for call, args in items:
            prepared.append(self._prepare(call, args, sample=sample))
        requests = [r for p in prepared if p is not None for r in p[2]]
        completions = self._complete(requests) if requests else []
        out: list[tuple[Statistics, list[Any]] | None] = []
        at = 0
        for p in prepared:
            if p is None:
                out.append(None)
                continue
            call, prompt, reqs = p
            got = completions[at : at + len(reqs)]
            at += len(reqs)
            out.append(self._finish(call, prompt, got))
        return out

    def _prepare(
        self, call: SemCall, args: Sequence[pa.Array], *, sample: bool
    ) -> tuple[SemCall, float, list[LLMRequest]] | None:
        if self.estimator is None and call.kind is OperatorKind.JOIN:
            return None  # nothing to say about a join's selectivity without a model
        columns = [render_column(a) for a in args]  # as the engine renders them
        rows = [i for i in range(len(args[0]) if args else 0)
                if all(col[i] is not None for col in columns)]  # fmt: skip
        if not rows:
            return None
        rows = [rows[i] for i in _spread(len(rows), COUNTED_ROWS)]  # tokens: a mean of a sample
        template = parse_template(call.template)
        rendered = [template.render([str(col[i]) for col in columns]) for i in rows]
        first = build_request(call.kind, rendered[0], output_type=call.output_type,
                              template=template, options=call.options,
                              labels=call.labels)  # fmt: skip
        prefix = first.prefix
        counter = self.counter(call)
        prompt = self._prefix(prefix, counter) + sum(map(counter.count_tokens, rendered)) / len(
            rows
        )
        picked = _spread(len(rendered), self.sample_rows) if sample and self.estimator else []
        requests = [build_request(call.kind, rendered[i], output_type=call.output_type,
                                  template=template, options=call.options,
                                  labels=call.labels)
                    for i in picked]  # fmt: skip
        return call, prompt, requests

    def _finish(
        self, call: SemCall, prompt: float, completions: Sequence[Any]
    ) -> tuple[Statistics, list[Any]]:
        answers = [c.value for c in completions]
        decide = call.kind in (OperatorKind.FILTER, OperatorKind.JOIN)
        selectivity, completion = (0.5 if decide else 1.0), 1.0
        if not decide:
            # nothing sampled yet: the cost model's documented length for the output type (a
            # generated VARCHAR is not one token), so EXPLAIN's time is not a tenth of the run's
            completion = CostModel().call_stats(call).completion_tokens_per_row
        if completions and decide:
            decided = [a for a in answers if a is not None]
            selectivity = sum(1 for a in decided if a) / len(decided) if decided else 0.5
        elif completions:
            texts = [c.text for c in completions if c.error is None]
            if texts:
                counter = self.counter(call)
                completion = sum(counter.count_tokens(t) + 1 for t in texts) / len(texts)
        return Statistics(selectivity, prompt, completion, len(completions)), answers

    def _prefix(self, prefix: str, counter: TokenCounter) -> int:
        key = (id(counter), prefix)
        if key not in self._prefix_tokens:
            self._prefix_tokens[key] = counter.count_tokens(prefix)
        return self._prefix_tokens[key]

    def _complete(self, requests: list[LLMRequest]) -> list[Any]:
        assert self.estimator is not None
        clock = getattr(self.estimator, "virtual_seconds", None)
        started = time.perf_counter()
        out = []
        step = max(1, self.estimator.capacity().max_batch)
        for i in range(0, len(requests), step):
            chunk = requests[i : i + step]
            out.extend(self.via(chunk) if self.via is not None else self.estimator.complete(chunk))
        if clock is not None:
            spent = float(self.estimator.virtual_seconds) - float(clock)  # type: ignore[attr-defined]
        else:
            spent = time.perf_counter() - started
        with self._lock:
            self.seconds += spent
            self.calls += len(requests)
        return out

    # -- before each SEU ------------------------------------------------------------------------
    def profile_batch(
        self, batch: pa.RecordBatch | pa.Table, calls: Iterable[SemCall], *, sample: bool = True
    ) -> dict[str, Statistics]:
        """Per-batch statistics for the calls whose arguments are all columns of ``batch``
        (``sample=False``: prompt tokens counted on every row, no estimator call)."""
        names = set(batch.schema.names)
        usable = [c for c in calls if c.kind is not OperatorKind.AGG and set(c.args) <= names]
        measured = self.measure_many(
            [(c, [batch.column(a) for a in c.args]) for c in usable], sample=sample
        )
        return {operator_signature(c): m[0]
                for c, m in zip(usable, measured, strict=True) if m is not None}  # fmt: skip

    # -- before the query -----------------------------------------------------------------------
    def profile_plan(self, con: Any, plan: Node) -> ProfileResult:
        """Sample every scan of ``plan`` and push the samples through its operators."""
        before_s, before_calls = self.seconds, self.calls
        tables: dict[str, pa.Table] = {}
        owner: dict[str, str] = {}  # attribute -> alias whose sample table holds it
        for node in plan.walk():
            if isinstance(node, Scan) and node.alias not in tables:
                tables[node.alias] = self._sample_scan(con, node)
                for attr in node.produces:
                    owner[attr] = node.alias
        stats: dict[str, Statistics] = {}
        for op in semantic_calls(plan):
            call: SemCall = op.call  # type: ignore[attr-defined]
            aliases = sorted({owner.get(a, "") for a in call.args})
            if "" in aliases:
                continue
            table = tables[aliases[0]] if len(aliases) == 1 else self._pairs(tables, aliases)
            if table.num_rows == 0:
                continue
            measured = self.measure(call, [table.column(a) for a in call.args])
            if measured is None:
                continue
            stats[operator_signature(call)] = measured[0]
            if isinstance(op, SemMap) and len(aliases) == 1 and measured[1]:
                table = _with_map_output(table, op, measured[1], self.sample_rows)
                tables[aliases[0]] = table
                owner[op.output] = aliases[0]
        return ProfileResult(stats, self.seconds - before_s, self.calls - before_calls)

    def _sample_scan(self, con: Any, scan: Scan) -> pa.Table:
        cols = ", ".join(f"{quote(scan.alias)}.{quote(c)} AS {quote(scan.alias + '.' + c)}"
                         for c in scan.columns)  # fmt: skip
        sql = f"SELECT {cols} FROM {scan.table} AS {quote(scan.alias)}"
        if scan.filters:
            sql = f"SELECT * FROM ({sql}) WHERE " + " AND ".join(f.sql for f in scan.filters)
        n = max(1, self.sample_rows)
        sampled = f"SELECT * FROM ({sql}) USING SAMPLE reservoir({n} ROWS) REPEATABLE ({self.seed})"
        table: pa.Table = con.sql(sampled).to_arrow_table()
        return table

    def _pairs(self, tables: dict[str, pa.Table], aliases: list[str]) -> pa.Table:
        """Up to ``sample_rows`` row pairs across the sampled tables (diagonal walk)."""
        parts = [tables[a] for a in aliases]
        n = min(self.sample_rows, *(t.num_rows for t in parts)) if parts else 0
        columns: dict[str, pa.Array] = {}
        for k, t in enumerate(parts):
            idx = pa.array([(i + k) % max(t.num_rows, 1) for i in range(n)], type=pa.int64())
            taken = t.take(idx)
            for name in taken.schema.names:
                columns[name] = taken.column(name).combine_chunks()
        return pa.table(columns) if columns else pa.table({})


#: rows of a batch whose prompt tokens are counted (spread over it): the mean of 64 rows is
#: within a few percent of the batch's, and counting every row cost a render per row per SEU
COUNTED_ROWS = 64


def _spread(n: int, k: int) -> list[int]:
    """``k`` indices spread evenly over ``range(n)`` (deterministic and representative)."""
    if k <= 0 or n == 0:
        return []
    if k >= n:
        return list(range(n))
    return sorted({int(i * n / k) for i in range(k)})


def _with_map_output(table: pa.Table, op: SemMap, answers: list[Any], k: int) -> pa.Table:
    """The sample rows that the estimator answered, with the map's output column added."""
    picked = _spread(table.num_rows, k)[: len(answers)]
    sub = table.take(pa.array(picked, type=pa.int64()))
    return sub.append_column(op.output, pa.array([None if a is None else str(a) for a in answers]))
