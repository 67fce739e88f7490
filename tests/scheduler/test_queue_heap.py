"""The heap queues pop in exactly the order of the plain definitions (a minimum over the queue
of the time-dependent key), through pushes, fusion bumps, removals and pops at later times."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from duckdb_sem.scheduler.policies import MLFQ, Joint, PreemptDB, QueuedSEU, make_policy


def _reference_key(name: str, policy: Any, item: QueuedSEU, now: float) -> tuple[float, ...]:
    if name in ("srtf", "joint"):
        key = (item.effective_cost - policy.aging_rate * max(0.0, now - item.arrival),)
    elif name == "fcfs":
        key = (item.query_arrival,)
    elif name == "mlfq":
        key = (float(policy.level(item.attained)), item.arrival)
    else:
        key = (1.0 if item.effective_cost > policy.threshold else 0.0, item.query_arrival)
    return (*key, item.query_arrival, item.seq)


def _reference_pop(name: str, policy: Any, queue: list[QueuedSEU], now: float) -> QueuedSEU:
    pool = queue
    if name == "joint":  # the definition: a quantile cut, and long work's guaranteed share
        costs = sorted(i.effective_cost for i in queue)
        cut = costs[int(policy.long_quantile * (len(costs) - 1))]
        long = [i for i in queue if i.effective_cost > cut]
        if long and policy.long_fraction() < policy.long_share:
            pool = long
    return min(pool, key=lambda i: _reference_key(name, policy, i, now))


op = st.one_of(
    st.tuples(st.just("push"), st.integers(0, 50), st.integers(1, 5), st.integers(0, 3)),
    st.tuples(st.just("bump"), st.integers(0, 30)),
    st.tuples(st.just("remove"), st.integers(0, 30)),
    st.tuples(st.just("pop"), st.integers(0, 3)),
)


@settings(max_examples=150, deadline=None)
@given(
    name=st.sampled_from(["fcfs", "srtf", "mlfq", "preemptdb", "joint"]),
    ops=st.lists(op, max_size=60),
)
def test_heap_order_is_the_definitions_order(name: str, ops: list[tuple[Any, ...]]) -> None:
    built = {
        "mlfq": lambda: MLFQ(quantum=10, levels=4),
        "preemptdb": lambda: PreemptDB(threshold=20),
        "joint": lambda: Joint(aging_rate=1.0, long_share=0.3, window=4),
    }
    policy = built[name]() if name in built else make_policy(name, aging_rate=1.0)
    queue: list[QueuedSEU] = []
    now = 0.0
    for step in ops:
        if step[0] == "push":
            _, cost, size, query = step
            item = QueuedSEU(f"q{query}", now, float(query), float(cost), size, tokens=size * 10)
            item.attained = float(query * 7)
            queue.append(item)
            policy.push(item)
        elif step[0] in ("bump", "remove") and queue:
            item = queue[step[1] % len(queue)]
            if step[0] == "bump":
                item.contribution += 1.0  # fusion: one more query waits on it
                policy.update(item)
            else:
                queue.remove(item)
                policy.remove(item)
        elif step[0] == "pop":
            now += step[1]
            if not queue:
                assert policy.pop(now) is None
                continue
            expected = _reference_pop(name, policy, queue, now)
            got = policy.pop(now)
            assert got is expected
            queue.remove(expected)
            policy.dispatched(expected, now)
        assert len(policy) == len(queue) and set(policy.items()) == set(queue)
