"""Bounded waiting under SRTF with aging (property test).

With aging rate ``a``, an SEU queued at ``t0`` with cost ``c`` can only be overtaken by SEUs
that arrive before ``t0 + c / a`` (every key falls at the same rate). On one replica serving one
SEU per second, its wait is therefore at most the number of SEUs queued ahead plus those
arriving in that window, whatever the arrival pattern. Without aging no such bound exists.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from sched_helpers import Harness

costs = st.floats(min_value=0, max_value=1000, allow_nan=False)
# per second: how many SEUs arrive (0-2) and their costs
arrivals = st.lists(st.lists(costs, max_size=2), min_size=1, max_size=60)


@settings(max_examples=60, deadline=None)
@given(arrivals=arrivals, rate=st.floats(min_value=1, max_value=200))
def test_srtf_with_aging_bounds_every_wait(arrivals: list[list[float]], rate: float) -> None:
    h = Harness("srtf", aging_rate=rate)
    queued_at: dict[str, tuple[float, float, int]] = {}  # id -> (t0, cost, queue length ahead)
    arrived: list[tuple[float, str]] = []
    started: dict[str, float] = {}
    n = 0
    t = 0
    while t < len(arrivals) or h.executor.running or len(h.scheduler.policy):
        for cost in arrivals[t] if t < len(arrivals) else []:
            qid = f"q{n}"
            n += 1
            queued_at[qid] = (float(t), cost, len(h.scheduler.policy) + len(h.executor.running))
            arrived.append((float(t), qid))
            h.submit(qid, [qid], cost=cost)
            if h.dispatched[-1] == qid:
                started.setdefault(qid, float(t))
        t += 1
        h.clock.now = float(t)
        if h.executor.running:
            h.finish_next()
            for d in h.executor.started:
                started.setdefault(d.query_id, float(t))
    for qid, (t0, cost, ahead) in queued_at.items():
        window = sum(1 for ta, other in arrived if t0 <= ta <= t0 + cost / rate and other != qid)
        assert started[qid] - t0 <= ahead + window + 1, (qid, t0, cost, started[qid])


def test_without_aging_the_long_seu_waits_as_long_as_short_ones_keep_coming() -> None:
    h = Harness("srtf", aging_rate=0.0)
    h.submit("blocker", ["b"], cost=0)
    h.submit("long", ["long"], cost=1000)
    for step in range(200):
        h.submit(f"s{step}", [f"s{step}"], cost=1)
        h.clock.now = step + 1.0
        h.finish_next()
    assert "long" not in h.dispatched
