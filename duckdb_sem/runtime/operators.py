"""``SemEngine``: runs one semantic operator over Arrow arrays, as a sequence of SEUs.

Every LLM call of duckdb-sem goes through :meth:`SemEngine.run_operator`, whether it comes from
a DuckDB UDF batch or from the plan executor. Per call it renders the template for each row,
skips rows with a NULL input (the answer is NULL, as for any SQL function), asks each distinct
prompt once per query (in-query memo), cuts the rest into SEUs of ``batch_size`` requests and
submits them one at a time to the scheduler client, so other queries can run in between.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from duckdb_sem.backends.tokens import estimate_tokens
from duckdb_sem.cache.arrays import AnswerArrays, Remembered, array_digest
from duckdb_sem.errors import BindError, TemplateError
from duckdb_sem.llm.call_options import DEFAULT_OPTIONS, CallOptions
from duckdb_sem.llm.guard import OutputGuard, drop_repeated_lines
from duckdb_sem.llm.outputs import parse_type, to_arrow
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.render import render_column, render_lists
from duckdb_sem.llm.request import Completion, LLMRequest, OperatorKind, Task
from duckdb_sem.llm.template import Template, parse_template
from duckdb_sem.optimizer.cost import CostModel
from duckdb_sem.runtime.context import QueryContext
from duckdb_sem.runtime.embeddings import Embeddings
from duckdb_sem.runtime.per_row import answer_per_row
from duckdb_sem.runtime.submit import COMPLETIONS, submit
from duckdb_sem.scheduler.models import Models
from duckdb_sem.scheduler.seu import SchedulerClient

__all__ = ["AGG_CHUNK_CHARS", "SemEngine"]

log = logging.getLogger(__name__)

#: sem_agg folds its input in chunks of about this many characters (~200 tokens, about five
#: short reviews), then aggregates the partial answers the same way (map-reduce), so any group
#: fits a small model's context. Small chunks because a 135M model summarizes a few records
#: better than many: on the 10 tuning movies of benchmarks/quality_summaries.py, Spearman 0.36
#: at 800 characters against 0.26 at 4,000 (twice the completion tokens).
AGG_CHUNK_CHARS = 800


class SemEngine:
    """Runs operators on ``client`` (the connection's default model) or, for a call with
    ``model :=``, on that model's client in ``models``."""

    def __init__(
        self,
        client: SchedulerClient,
        *,
        batch_size: int = 64,
        models: Models | None = None,
        embeddings: Embeddings | None = None,
    ) -> None:
        self.batch_size = batch_size
        self.models = models if models is not None else Models(client)
        self.models.default = client
        #: the session's embedding model (sem_sim_join, sem_search, blocked joins), built lazily
        self.embeddings = embeddings

    @property
    def client(self) -> SchedulerClient:
        """The default model's scheduler client (``models.default``)."""
        return self.models.default

    @client.setter
    def client(self, value: SchedulerClient) -> None:
        self.models.default = value

    def cancel(self, query_id: str) -> None:
        """Drop ``query_id``'s queued work on every model's scheduler."""
        self.models.cancel(query_id)

    def close(self) -> None:
        """Release this engine's share of every model's scheduler."""
        self.models.close()
        self.client.close()

    def run_operator(
        self,
        kind: OperatorKind,
        template: str,
        args: Sequence[pa.Array],
        *,
        output_type: str | None = None,
        query: QueryContext,
        label: str = "",
        options: CallOptions = DEFAULT_OPTIONS,
        labels: tuple[str, ...] = (),
    ) -> pa.Array:
        """Answer ``template`` (positional fields ``{0}``…) for every row of ``args``, on the
        model ``options`` names (checked before anything is asked); ``labels`` (a
        ``sem_classify``): the answer is the best of them."""
        self.models.check(options.model)
        parsed = parse_template(template)
        if not parsed.is_positional:
            names = ", ".join("{" + f + "}" for f in parsed.fields if not f.isdigit())
            raise TemplateError(
                f"template {template!r} names columns ({names}) but this call was not bound; "
                "use duckdb_sem.connect() (which binds {column} fields), or the explicit form "
                "sem_filter('... {0} ...', column)"
            )
        if not parsed.fields:
            raise TemplateError(f"template {template!r} names no column; put one in braces")
        needed = max(int(f) for f in parsed.fields) + 1
        if len(args) < needed:
            raise TemplateError(
                f"template {template!r} uses {{{needed - 1}}} but only {len(args)} column(s) were given"
            )
        label = label or f"sem_{kind.value}"
        if options.per_row is not None:  # the call's opt-in rewrite: ask rows, not pairs
            if kind is not OperatorKind.JOIN:
                raise BindError(f"sem_{kind.value}: per_row := applies only to sem_join")
            return answer_per_row(self, template, args, query=query, label=label,
                                  options=options)  # fmt: skip
        if kind is OperatorKind.AGG:
            return self._aggregate(parsed, args, output_type, query, label, options)
        client = self.models.client(options.model)
        arrays = getattr(getattr(client, "cache", None), "arrays", None)
        if not isinstance(arrays, AnswerArrays):  # no persistent cache: every run asks again
            return self._run_rows(kind, parsed, args, output_type, query, label, options, labels)
        identity = (client.backend_id, kind.value, template, output_type, options, labels)
        key = array_digest(identity, args)
        hit = arrays.get(key)
        if hit is not None:  # a repeated batch: the answers a cached run would read
            query.add(**dict(hit.counts))
            return hit.values
        before = query.counts()
        values = self._run_rows(kind, parsed, args, output_type, query, label, options, labels)
        after = query.counts()
        if after.get("null_outputs", 0) == before.get("null_outputs", 0):  # only whole answers
            arrays.put(key, Remembered(values, _as_cached(before, after)))
        return values

    def _run_rows(
        self,
        kind: OperatorKind,
        parsed: Template,
        args: Sequence[pa.Array],
        output_type: str | None,
        query: QueryContext,
        label: str,
        options: CallOptions,
        labels: tuple[str, ...],
    ) -> pa.Array:
        """Ask the rows of ``args`` one request each (memo, SEUs, scheduler)."""
        answers = self.completions(kind, parsed, args, output_type=output_type, query=query,
                                   label=label, options=options, labels=labels)  # fmt: skip
        values = [None if c is None else c.value for c in answers]
        if kind in (OperatorKind.FILTER, OperatorKind.JOIN):
            return pa.array(values, type=pa.bool_())
        return to_arrow(parse_type(output_type or "VARCHAR"), values)

    def completions(
        self,
        kind: OperatorKind,
        template: Template,
        args: Sequence[pa.Array],
        *,
        output_type: str | None = None,
        query: QueryContext,
        label: str,
        options: CallOptions = DEFAULT_OPTIONS,
        labels: tuple[str, ...] = (),
    ) -> list[Completion | None]:
        """Each row of ``args`` rendered into ``template`` (positional) and asked once: the
        completions in row order, None for a row with a NULL input. The one render-and-ask
        path of every operator (``sem_topk`` reads the scores from it)."""
        self.models.check(options.model)
        rows = len(args[0]) if args else 0
        columns = [render_column(a) for a in args]  # one renderer for every entry
        requests: list[LLMRequest | None] = []
        for i in range(rows):
            values = [col[i] for col in columns]
            if any(v is None for v in values):
                requests.append(None)
                continue
            rendered = template.render(values)  # type: ignore[arg-type]
            requests.append(build_request(kind, rendered, output_type=output_type,
                                          template=template, options=options,
                                          labels=labels))  # fmt: skip
        return self.answer(requests, query=query, label=label, model=options.model,
                           batch_size=options.batch_size)  # fmt: skip

    def answer(
        self,
        requests: Sequence[LLMRequest | None],
        *,
        query: QueryContext,
        label: str,
        model: str | None = None,
        batch_size: int | None = None,
    ) -> list[Completion | None]:
        """Completions for ``requests`` (None stays None), via memo, SEUs and the scheduler
        of ``model`` (None: the default); its backend identity signs every request. SEUs hold
        ``batch_size`` requests (a call's ``batch_size :=``; None: the engine's)."""
        client = self.models.client(model)
        backend_id = client.backend_id
        sigs = [None if r is None else r.signature(backend_id) for r in requests]
        todo: dict[str, LLMRequest] = {}
        # this call's answers, kept here: the memo is bounded and may evict them meanwhile
        got: dict[str, object] = {}
        for sig, request in zip(sigs, requests, strict=True):
            if sig is None or request is None or sig in got or sig in todo:
                continue
            hit = query.memo.get(sig)
            if hit is not None:
                got[sig] = hit
            else:
                todo[sig] = request
        asked = sum(1 for s in sigs if s is not None)
        query.add(rows=asked, deduplicated=asked - len(todo))
        items = list(todo.items())
        # what is left, in the cost model's token-equivalents (the unit of the planned
        # queries' estimates too), so SRTF compares UDF and planned queries on one scale
        left = [0.0] * (len(items) + 1)
        for i in range(len(items) - 1, -1, -1):
            left[i] = left[i + 1] + _request_cost(items[i][1])
        if log.isEnabledFor(logging.DEBUG):  # -vv: one line per request, the row as rendered
            for sig, r in items:
                log.debug("%s %s %s %s: %r", query.query_id, label, sig[:12],
                          r.output.task.value, r.row[:300])  # fmt: skip
        answered = submit(client, items, query=query, label=label, ledger=COMPLETIONS,
                          batch_size=batch_size or self.batch_size, remaining=left.__getitem__,
                          cached=lambda s: _cached(client, s))  # fmt: skip
        for sig, completion, _ in answered:
            query.memo[sig] = completion
            got[sig] = completion
        out: list[Completion | None] = []
        for sig in sigs:
            if sig is None:
                out.append(None)
                continue
            answer = got[sig]
            assert isinstance(answer, Completion)
            query.add(
                llm_calls=1,
                prompt_tokens=answer.prompt_tokens,
                completion_tokens=answer.completion_tokens,
            )
            out.append(answer)
        return out

    def _aggregate(
        self,
        template: Template,
        args: Sequence[pa.Array],
        output_type: str | None,
        query: QueryContext,
        label: str,
        options: CallOptions,
    ) -> pa.Array:
        groups = [render_lists(a) for a in args]
        results: list[Any] = []
        for g in range(len(args[0])):
            columns = [[v for v in (col[g] or []) if v is not None] for col in groups]
            if not any(columns):
                results.append(None)
                continue
            results.append(self._fold(template, columns, output_type, query, label, options))
        return to_arrow(parse_type(output_type or "VARCHAR"), results)

    def _fold(
        self,
        template: Template,
        columns: list[list[str]],
        output_type: str | None,
        query: QueryContext,
        label: str,
        options: CallOptions,
    ) -> Any:
        """Aggregate records in chunks that fit the context, then the partial answers; every
        level is guarded against copying the group's records, and no answer repeats a line
        (:mod:`duckdb_sem.llm.guard`: enforced while decoding where the backend can, and the
        repeated lines dropped here for every backend)."""
        guard = OutputGuard(tuple(v for col in columns for v in col))
        while True:
            chunks = _chunk_records(columns)
            requests: list[LLMRequest | None] = [
                build_request(
                    OperatorKind.AGG,
                    template.render([_numbered(col) for col in chunk]),
                    output_type=output_type if len(chunks) == 1 else None,
                    options=options,
                    guard=guard,
                )
                for chunk in chunks
            ]
            answers = self.answer(requests, query=query, label=label, model=options.model,
                                  batch_size=options.batch_size)  # fmt: skip
            values = [None if a is None else _distinct_lines(a.value) for a in answers]
            if len(chunks) == 1:
                return values[0]
            partial = [str(v) for v in values if v is not None]
            columns = [partial] + [[] for _ in columns[1:]]


#: the counters a replayed batch adds as they are (its virtual work), and those that become
#: cache hits (what the backend, the cache or a fused query answered the first time)
_VIRTUAL = ("rows", "deduplicated", "llm_calls", "prompt_tokens", "completion_tokens")
_SERVED = ("physical_calls", "cache_hits", "fused")


def _as_cached(before: dict[str, float], after: dict[str, float]) -> tuple[tuple[str, float], ...]:
    """The counters of a batch's run, as a run served wholly from the cache adds them."""
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in (*_VIRTUAL, *_SERVED)}
    counts = {k: delta[k] for k in _VIRTUAL if delta[k]}
    served = sum(delta[k] for k in _SERVED)
    if served:
        counts["cache_hits"] = served
    return tuple(counts.items())


def _cached(client: SchedulerClient, signatures: list[str]) -> set[str]:
    """The signatures the client's cache answers (none known without a local cache)."""
    cache = getattr(client, "cache", None)
    if cache is None or not hasattr(cache, "get_many"):
        return set()
    return set(cache.get_many(signatures))


def _chunk_records(columns: list[list[str]]) -> list[list[list[str]]]:
    """Split parallel record lists into chunks of at most ``AGG_CHUNK_CHARS`` characters."""
    n = max(len(c) for c in columns)
    chunks: list[list[list[str]]] = []
    current: list[list[str]] = [[] for _ in columns]
    size = 0
    for i in range(n):
        row = [col[i] if i < len(col) else "" for col in columns]
        row_size = sum(len(v) for v in row)
        if size and size + row_size > AGG_CHUNK_CHARS:
            chunks.append(current)
            current, size = [[] for _ in columns], 0
        for j, value in enumerate(row):
            current[j].append(value[:AGG_CHUNK_CHARS])
        size += row_size
    chunks.append(current)
    return chunks


def _numbered(values: list[str]) -> str:
    # one record a line, unnumbered: numbered records were answered with a numbered copy
    return "\n" + "\n".join(f"- {v}" for v in values) + "\n"


def _distinct_lines(value: Any) -> Any:
    return drop_repeated_lines(value) if isinstance(value, str) else value


_COSTS = CostModel()


def _request_cost(request: LLMRequest) -> float:
    prompt = estimate_tokens(request.prefix) + estimate_tokens(request.row)
    output = None if request.output.task is Task.DECIDE else request.output.sql_type
    return _COSTS.request_cost(prompt, output)
