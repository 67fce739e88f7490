"""Dispatch order per policy: one replica taking one SEU at a time, fabricated completions."""

from __future__ import annotations

import pytest
from sched_helpers import Harness, rows

from duckdb_sem.errors import ConfigError
from duckdb_sem.scheduler.policies import MLFQ, POLICIES, Joint, PreemptDB, make_policy


def _block(h: Harness) -> None:
    """Occupy the only replica so that later submissions queue up."""
    h.submit("blocker", rows("blocker", 1), cost=1)
    assert h.dispatched == ["blocker"]


def test_fcfs_runs_queries_in_arrival_order() -> None:
    h = Harness("fcfs")
    _block(h)
    for qid, cost in [("long", 1000), ("short", 10), ("mid", 100)]:
        h.clock.advance(0.1)
        h.submit(qid, rows(qid, 2), cost=cost)
    assert h.run_all() == ["blocker", "long", "short", "mid"]


def test_fcfs_keeps_an_earlier_query_ahead_for_its_later_seus() -> None:
    h = Harness("fcfs")
    h.submit("a", rows("a1", 1), cost=5)  # a arrives first and runs
    h.clock.advance(1)
    h.submit("b", rows("b1", 1), cost=1)
    h.clock.advance(1)
    h.finish_next()  # a's SEU 1 done; b's SEU 1 goes out
    h.submit("a", rows("a2", 1), cost=5)  # a's SEU 2 queues behind b's running SEU
    h.clock.advance(1)
    h.finish_next()  # b's SEU 1 done; a's SEU 2 goes out
    h.submit("b", rows("b2", 1), cost=1)
    h.submit("c", rows("c1", 1), cost=1)
    h.submit("a", rows("a3", 1), cost=5)  # queued after b2 and c1, but a is the oldest query
    assert h.run_all() == ["a", "a", "b", "c"]


def test_srtf_runs_the_least_remaining_cost_first() -> None:
    h = Harness("srtf", aging_rate=0.0)
    _block(h)
    for qid, cost in [("long", 1000), ("short", 10), ("mid", 100)]:
        h.submit(qid, rows(qid, 2), cost=cost)
    assert h.run_all() == ["blocker", "short", "mid", "long"]


def test_srtf_preempts_a_long_query_at_its_seu_boundary() -> None:
    h = Harness("srtf", aging_rate=0.0)
    h.submit("long", rows("long-1", 4), cost=1000)
    h.submit("short", rows("short", 1), cost=5)  # arrives while long's first SEU runs
    h.clock.advance(1)
    h.finish_next()  # long's SEU 1 completes: nothing it did is lost...
    h.submit("long", rows("long-2", 4), cost=900)  # ...and its next SEU waits behind short
    assert h.dispatched == ["long", "short"]
    assert h.run_all() == ["short", "long"]


def test_srtf_aging_lets_a_long_waiter_overtake_newcomers() -> None:
    h = Harness("srtf", aging_rate=10.0)
    _block(h)
    h.submit("long", rows("long", 1), cost=100)
    h.clock.advance(20)  # long's key: 100 - 10*20 = -100
    h.submit("short", rows("short", 1), cost=5)  # key 5
    assert h.run_all() == ["blocker", "long", "short"]


def test_mlfq_orders_by_attained_service_then_arrival() -> None:
    h = Harness(MLFQ(quantum=10, levels=4))
    h.submit("heavy", rows("heavy", 40), cost=0)  # runs at once: attains ~40 rows of tokens
    h.submit("fresh1", rows("fresh1", 1), cost=0)
    h.clock.advance(1)
    h.finish_next()  # heavy sinks to a lower level; fresh1 goes out
    h.submit("heavy", rows("heavy-2", 1), cost=0)  # queued first...
    h.submit("fresh2", rows("fresh2", 1), cost=0)  # ...but fresh2 attained nothing
    assert h.run_all() == ["fresh1", "fresh2", "heavy"]


def test_mlfq_levels_double_in_width() -> None:
    m = MLFQ(quantum=100, levels=4)
    assert [m.level(a) for a in (0, 99, 100, 299, 300, 699, 700, 10**9)] == [0, 0, 1, 1, 2, 2, 3, 3]


def test_preemptdb_short_class_always_first_each_class_fcfs() -> None:
    h = Harness(PreemptDB(threshold=50))
    _block(h)
    for qid, cost in [("long1", 500), ("short1", 40), ("long2", 60), ("short2", 10)]:
        h.clock.advance(0.1)
        h.submit(qid, rows(qid, 1), cost=cost)
    assert h.run_all() == ["blocker", "short1", "short2", "long1", "long2"]


def test_joint_runs_short_by_priority_after_the_long_share_is_met() -> None:
    h = Harness(Joint(aging_rate=0.0, long_quantile=0.9, long_share=0.3, window=4))
    _block(h)
    h.submit("long", rows("long", 1), cost=10_000)
    for i in range(6):
        h.submit(f"s{i}", rows(f"s{i}", 1), cost=10 + i)
    # the window holds only the (short) blocker: long's share is 0 < 30%, so it goes first;
    # after that the shorts run by remaining cost until long work's share falls under 30%
    assert h.run_all()[:4] == ["blocker", "long", "s0", "s1"]


def test_joint_guarantees_long_queries_a_minimum_share_under_a_stream_of_short_ones() -> None:
    h = Harness(Joint(aging_rate=0.0, long_quantile=0.5, long_share=0.25, window=8))
    h.submit("long", rows("long-0", 1), cost=10_000)
    served = []
    for step in range(80):
        h.submit(f"s{step}", rows(f"s{step}", 1), cost=10)  # a new short query every step
        h.clock.advance(1)
        done = h.finish_next()
        served.append(done.query_id)
        if done.query_id == "long":
            h.submit("long", rows(f"long-{step + 1}", 1), cost=10_000 - step)
    share = served.count("long") / len(served)
    assert 0.2 <= share <= 0.4, share  # SRTF alone would give long nothing after its first SEU


def test_srtf_without_aging_starves_the_long_query_under_the_same_stream() -> None:
    h = Harness("srtf", aging_rate=0.0)
    _block(h)
    h.submit("long", rows("long-0", 1), cost=10_000)
    served = []
    for step in range(40):
        h.submit(f"s{step}", rows(f"s{step}", 1), cost=10)
        h.clock.advance(1)
        served.append(h.finish_next().query_id)
    assert "long" not in served


def test_joint_without_share_is_srtf_with_contribution() -> None:
    h = Harness(Joint(aging_rate=0.0, long_share=0.0))
    _block(h)
    h.submit("a", rows("shared", 4), cost=100)
    h.submit("b", rows("b", 4), cost=60)
    for q in ("c", "d"):  # two more queries wait on a's requests: its contribution is 3
        h.submit(q, rows("shared", 4), cost=500)
    assert h.run_all() == ["blocker", "a", "b"]


@pytest.mark.parametrize("name", POLICIES)
def test_every_policy_drains_everything_exactly_once(name: str) -> None:
    h = Harness(name)
    futures = [h.submit(f"q{i}", rows(f"q{i}", 3), cost=float(i * 37 % 11)) for i in range(12)]
    h.run_all()
    assert all(f.done() and len(f.result().completions) == 3 for f in futures)
    assert sorted(h.dispatched) == sorted(f"q{i}" for i in range(12))
    assert len(h.scheduler.policy) == 0


def test_make_policy_rejects_unknown_names_and_bad_options() -> None:
    with pytest.raises(ConfigError, match="use one of fcfs, srtf, mlfq, preemptdb, joint"):
        make_policy("lifo")
    with pytest.raises(ConfigError, match="bad options"):
        make_policy("mlfq", quantum=-1)
