"""Admission control: bounded work in flight per replica, least-loaded dispatch."""

from __future__ import annotations

from sched_helpers import Harness, rows


def test_a_replica_holds_at_most_its_request_budget_the_rest_waits_in_the_queue() -> None:
    h = Harness("fcfs", dispatches=8, max_requests=10)
    for q in "abcd":
        h.submit(q, rows(q, 4))
    assert h.dispatched == ["a", "b"]  # 8 requests in flight; a third SEU would exceed 10
    assert len(h.scheduler.policy) == 2
    h.finish_next()
    assert h.dispatched == ["a", "b", "c"]


def test_token_budget_bounds_in_flight_tokens() -> None:
    h = Harness("fcfs", dispatches=8, max_tokens=60)
    for q in "abc":
        h.submit(q, rows(q, 1))  # about 40 estimated tokens each (prefix + row + answer)
    assert h.dispatched == ["a"]
    assert h.scheduler.replicas[0].tokens <= 60


def test_an_idle_replica_always_takes_the_next_seu_however_large() -> None:
    h = Harness("fcfs", max_requests=2)
    h.submit("big", rows("big", 50))
    assert h.dispatched == ["big"]


def test_work_goes_to_the_least_loaded_replica() -> None:
    h = Harness("fcfs", replicas=2, dispatches=4)
    h.submit("a", rows("a", 8))
    h.submit("b", rows("b", 2))
    h.submit("c", rows("c", 2))  # replica 1 has 2 in flight, replica 0 has 8
    h.submit("d", rows("d", 1))
    replicas = {d.query_id: d.replica for d in h.executor.started}
    assert replicas == {"a": 0, "b": 1, "c": 1, "d": 1}
    assert [r.requests for r in h.scheduler.replicas] == [8, 5]


def test_completions_free_the_budget_and_pull_in_the_queue_in_policy_order() -> None:
    h = Harness("srtf", aging_rate=0.0, dispatches=1)
    h.submit("first", rows("first", 1), cost=50)
    h.submit("long", rows("long", 1), cost=500)
    h.submit("short", rows("short", 1), cost=5)
    assert h.run_all() == ["first", "short", "long"]
    assert h.scheduler.in_flight() == 0 and h.scheduler.queue_length() == 0
