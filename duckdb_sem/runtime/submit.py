"""The one way runtime work reaches a scheduler: SEUs of a query, budgeted and accounted once.

Completions (the target model's answers), embeddings, a cascade helper's scores and the
estimator's samples are all requests of one kind of SEU. :func:`submit` cuts a query's requests
into SEUs, and before each one checks the query's budget (calls, tokens, and the SEU's bound
in USD at its model's price, :mod:`.money`), puts the query's estimated remaining
cost on it (what SRTF orders by), waits for it as the query (a cancelled query stops waiting and
drops its queued work), and adds what came back to the query's counters named by the work's
:class:`Ledger`. Memoisation (which requests to ask at all) stays with each caller, since each
keeps a different value per request (a completion, a vector, a score).

Example: ``submit(client, items, query=q, label="sem_filter", ledger=COMPLETIONS,
batch_size=64)`` asks 200 requests as SEUs of 64, 64, 64 and 8, each checked against
``max_llm_calls`` before it is sent.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial

from duckdb_sem.llm.request import Completion, LLMRequest
from duckdb_sem.optimizer.spend import Price
from duckdb_sem.runtime.context import Progress, QueryContext
from duckdb_sem.runtime.money import spent
from duckdb_sem.runtime.waiting import wait_for
from duckdb_sem.scheduler.seu import SEU, SchedulerClient, Served, SEUFuture, SEUResult

__all__ = ["COMPLETIONS", "EMBEDDINGS", "ESTIMATOR", "HELPER", "LLM_CALLS", "Ledger", "submit"]

log = logging.getLogger(__name__)

Answered = tuple[str, Completion, Served]


@dataclass(frozen=True, slots=True)
class Ledger:
    """Which of a query's counters one kind of work adds to (``QueryStats`` field names)."""

    backend: str  # requests a backend ran
    cache: str  # answered by the persistent cache
    fused: str | None = None  # shared with another query's identical request in flight
    tokens: bool = False  # the backend's prompt and completion tokens too
    budgeted: bool = True  # counts against max_llm_calls / max_prompt_tokens
    waited: str | None = "llm_wait_seconds"  # the counter of seconds spent waiting
    progress: bool = False  # emits a Progress event per SEU


COMPLETIONS = Ledger("physical_calls", "cache_hits", "fused", tokens=True, progress=True)
HELPER = Ledger("helper_physical_calls", "helper_cache_hits", waited=None)
ESTIMATOR = Ledger("estimator_physical_calls", "estimator_cache_hits", waited=None)
EMBEDDINGS = Ledger("embed_physical_calls", "embed_cache_hits", budgeted=False,
                    waited="embed_wait_seconds")  # fmt: skip

#: the counters of LLM requests a budget bounds (every model's: target, helper, estimator)
LLM_CALLS = tuple(ledger.backend for ledger in (COMPLETIONS, HELPER, ESTIMATOR))


def submit(
    client: SchedulerClient,
    items: Sequence[tuple[str, LLMRequest]],
    *,
    query: QueryContext,
    label: str,
    ledger: Ledger,
    batch_size: int,
    remaining: Callable[[int], float] | None = None,
    cached: Callable[[list[str]], set[str]] | None = None,
) -> list[Answered]:
    """Ask ``items`` (signature, request) as SEUs of at most ``batch_size`` requests; every
    answer with how it was served. ``remaining(i)``: the caller's estimate of the work left
    from item ``i`` on (the query's planned estimate wins when larger); ``cached``: which
    signatures the cache holds, so a budget counts only what the backend would run."""
    order = _pairs_together(items)
    items = [items[i] for i in order]
    out: list[Answered] = []
    size = max(1, batch_size)
    price = query.pricing(client) if query.pricing is not None else None
    for start in range(0, len(items), size):
        chunk = items[start : start + size]
        budget = query.budget if ledger.budgeted else None
        drawn = None
        if budget is not None and budget.limited:
            counts = query.counts()
            drawn = budget.check(
                query_id=query.query_id,
                calls_so_far=int(sum(counts.get(name, 0) for name in LLM_CALLS)),
                tokens_so_far=int(counts.get("physical_prompt_tokens", 0)),
                pending=chunk,
                cached=cached or (lambda sigs: set()),
                cost_so_far=counts.get("cost_usd", 0.0),
                price=price,
            )
        left = remaining(start) if remaining is not None else 0.0
        if query.remaining_cost is not None:  # the estimator's figure, when planned
            left = max(query.remaining_cost, left)
        seu = SEU(query.query_id, label, tuple(r for _, r in chunk), left, query.connection)
        send = partial(_send, client, seu, query, label, start, len(items), ledger.progress)
        result = wait_for(client, send, query, waited=ledger.waited)  # not sent if cancelled
        ran = _Ran()
        for (sig, _), completion, how in zip(chunk, result.completions, result.served,
                                             strict=True):  # fmt: skip
            _account(query, ledger, completion, how, label, price, ran)
            out.append((sig, completion, how))
        if budget is not None:  # the session and quotas keep what it spent, not its bound
            budget.settle(drawn, calls=ran.calls, tokens=ran.tokens, cost=ran.cost)
        if ledger.progress:  # the target's SEUs: counted and shown (progress bar, top)
            query.add(seus=1)
            query.emit(Progress(query.query_id, label, start + len(chunk), len(items), 1))
    answers: list[Answered | None] = [None] * len(out)
    for at, answer in zip(order, out, strict=True):
        answers[at] = answer
    return [a for a in answers if a is not None]


def _pairs_together(items: Sequence[tuple[str, LLMRequest]]) -> list[int]:
    """The order to ask ``items`` in: pairs of a join that share their first side next to each
    other (:meth:`LLMRequest.first_side`), so a backend's KV or prefix cache holds that side
    for all of them (DuckDB's cross product emits pairs of one *right* row in a run, whatever
    side the template names first); otherwise as given."""
    sides = [r.first_side() for _, r in items]
    if all(side is None for side in sides):
        return list(range(len(items)))
    return sorted(range(len(items)), key=lambda i: (items[i][1].prefix, sides[i] or ""))


def _send(client: SchedulerClient, seu: SEU, query: QueryContext, label: str, start: int,
          total: int, progress: bool) -> Future[SEUResult]:  # fmt: skip
    """Submit ``seu``; the target's SEUs report their answers as they come (:func:`_watch`)."""
    future = client.submit(seu)
    if progress:
        _watch(future, query, label, start, total)
    return future


def _watch(future: object, query: QueryContext, label: str, start: int, total: int) -> None:
    """Emit a ``Progress`` (``seus=0``) after each backend batch of an SEU in flight, where the
    scheduler counts its answers as they come (``SEUFuture``; the sidecar's futures do not)."""
    if not isinstance(future, SEUFuture):
        return
    emitted = [0]
    lock = threading.Lock()  # two replicas may answer fused requests of one SEU at once

    def answered(n: int) -> None:
        with lock:
            if n <= emitted[0]:
                return
            emitted[0] = n
            query.emit(Progress(query.query_id, label, start + n, total, 0))

    future.add_answer_listener(answered)


@dataclass(slots=True)
class _Ran:
    """What the backend ran of one SEU: requests, prompt tokens, USD."""

    calls: int = 0
    tokens: int = 0
    cost: float = 0.0


def _account(query: QueryContext, ledger: Ledger, completion: Completion, how: Served,
             label: str, price: Price | None, ran: _Ran) -> None:  # fmt: skip
    if how is Served.BACKEND:
        query.add(**{ledger.backend: 1})
        cost = spent(completion, price)
        if cost:
            query.add(cost_usd=cost)
        ran.calls += 1
        ran.tokens += completion.prompt_tokens
        ran.cost += cost
        if ledger.tokens:
            query.add(physical_prompt_tokens=completion.prompt_tokens,
                      physical_completion_tokens=completion.completion_tokens,
                      physical_cached_tokens=completion.cached_tokens)  # fmt: skip
    elif how is Served.CACHE:
        query.add(**{ledger.cache: 1})
    elif ledger.fused is not None:
        query.add(**{ledger.fused: 1})
    if ledger.tokens and completion.error is not None:
        query.add(null_outputs=1)
        log.warning("%s: NULL for unparseable model output: %s", label, completion.error)
