"""Cross-query fusion: queued and in-flight sharing, cache reuse, priority summation, accounting."""

from __future__ import annotations

from pathlib import Path

import pytest
from sched_helpers import Harness, rows

from duckdb_sem.cache.store import LLMCache
from duckdb_sem.errors import QueryCancelledError
from duckdb_sem.scheduler.seu import Served


def _physical(h: Harness) -> int:
    return sum(len(d.requests) for d in h.executor.started)


def test_a_request_queued_by_another_query_is_not_queued_again() -> None:
    h = Harness("fcfs")
    h.submit("blocker", ["x"])
    fa = h.submit("a", [*rows("shared", 3), "only a"])
    fb = h.submit("b", [*rows("shared", 3), "only b"])
    h.run_all()
    assert _physical(h) == 1 + 4 + 1  # b ran only its own row
    assert fb.result().served == (Served.FUSED,) * 3 + (Served.BACKEND,)
    assert fa.result().completions[:3] == fb.result().completions[:3]


def test_a_request_already_running_is_awaited_not_rerun() -> None:
    h = Harness("fcfs", dispatches=2)
    h.submit("a", rows("shared", 2))  # dispatched at once
    fb = h.submit("b", rows("shared", 2))
    assert h.dispatched == ["a"]  # nothing new to run for b
    assert not fb.done()
    h.finish_next()
    assert fb.result().served == (Served.FUSED, Served.FUSED)


def test_a_finished_request_comes_from_the_cache(tmp_path: Path) -> None:
    h = Harness("fcfs", cache=LLMCache(tmp_path / "c.sqlite"))
    h.submit("a", rows("shared", 2))
    h.run_all()
    fb = h.submit("b", rows("shared", 2))
    assert fb.result().served == (Served.CACHE, Served.CACHE)
    assert _physical(h) == 2


def test_fusion_sums_priorities_so_shared_work_runs_earlier() -> None:
    h = Harness("srtf", aging_rate=0.0)
    h.submit("blocker", ["x"])
    h.submit("a", rows("shared", 2), cost=300)  # alone it would run after b
    h.submit("b", rows("b", 2), cost=200)
    for q in ("c", "d"):
        h.submit(q, rows("shared", 2), cost=900)  # a's work now counts for 3 queries: 300/3
    item = next(i for i in h.scheduler.policy.items() if i.query_id == "a")
    assert item.contribution == pytest.approx(3.0)
    assert h.run_all() == ["blocker", "a", "b"]


def test_one_query_fusing_twice_with_the_same_item_counts_once() -> None:
    h = Harness("srtf")
    h.submit("blocker", ["x"])
    h.submit("a", rows("s", 2), cost=10)
    h.submit("b", rows("s", 1), cost=10)
    h.submit("b", rows("s", 1), cost=10)  # the same request again from the same query
    item = next(i for i in h.scheduler.policy.items() if i.query_id == "a")
    assert item.contribution == pytest.approx(1.5)  # b waits on one of a's two requests


def test_cancel_keeps_work_another_query_waits_on() -> None:
    h = Harness("fcfs")
    h.submit("blocker", ["x"])
    fa = h.submit("a", [*rows("shared", 2), "a only"])
    fb = h.submit("b", rows("shared", 2))
    h.scheduler.cancel("a")
    with pytest.raises(QueryCancelledError):
        fa.result()
    h.run_all()
    assert len(fb.result().completions) == 2
    assert _physical(h) == 1 + 2  # a's shared rows still ran for b; a's own row was dropped


def test_cancel_drops_unshared_queued_work() -> None:
    h = Harness("fcfs")
    h.submit("blocker", ["x"])
    h.submit("a", rows("a", 5))
    h.scheduler.cancel("a")
    assert h.scheduler.queue_length() == 0
    h.run_all()
    assert h.dispatched == ["blocker"]


def test_accounting_splits_virtual_usage_into_physical_fused_and_cache(tmp_path: Path) -> None:
    h = Harness("fcfs", cache=LLMCache(tmp_path / "c.sqlite"))
    h.submit("blocker", ["x"])
    h.submit("a", rows("shared", 4))
    h.submit("b", rows("shared", 4))
    h.run_all()
    h.submit("c", rows("shared", 4))
    u = h.scheduler.usage
    assert (u.virtual_calls, u.physical_calls, u.fused_calls, u.cache_calls) == (13, 5, 4, 4)
    assert u.virtual_tokens == u.physical_tokens + u.fused_tokens + u.cache_tokens
    per_query = {q["query_id"]: q["usage"] for q in h.scheduler.status()["queries"]}  # type: ignore[index, union-attr]
    assert per_query["b"]["fused_calls"] == 4 and per_query["c"]["cache_calls"] == 4


def test_no_request_runs_twice_under_any_interleaving(tmp_path: Path) -> None:
    h = Harness("srtf", cache=LLMCache(tmp_path / "c.sqlite"), dispatches=2)
    futures = []
    for i in range(30):
        futures.append(h.submit(f"q{i}", rows("pool", 1 + i % 7)[i % 3 :], cost=i % 5))
        if i % 4 == 0:
            h.clock.advance(1)
            if h.executor.running:
                h.finish_next()
    h.run_all()
    signatures = [s for d in h.executor.started for s in d.signatures]
    assert len(signatures) == len(set(signatures)) == 7
    assert all(f.done() for f in futures)
