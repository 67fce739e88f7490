"""Replica placement: least loaded against prefix affinity (bounded-load rendezvous hashing)."""

from __future__ import annotations

import pytest
from sched_helpers import FakeBackend, answer

from duckdb_sem.backends.sim import SimBackend
from duckdb_sem.errors import ConfigError
from duckdb_sem.llm.request import DecodingParams, LLMRequest, OperatorKind, OutputSpec
from duckdb_sem.scheduler.admission import ReplicaLimits, ReplicaState
from duckdb_sem.scheduler.core import Scheduler
from duckdb_sem.scheduler.executor import ManualExecutor
from duckdb_sem.scheduler.placement import LeastLoaded, PrefixAffinity, make_placement
from duckdb_sem.scheduler.seu import SEU


def _replicas(n: int, *, max_requests: int = 64, dispatches: int = 2) -> list[ReplicaState]:
    return [
        ReplicaState(i, FakeBackend(), ReplicaLimits(dispatches, max_requests)) for i in range(n)
    ]


def _seu(qid: str, instruction: str, n: int, start: int = 0) -> SEU:
    requests = tuple(
        LLMRequest(
            OperatorKind.FILTER,
            instruction,
            f"row {start + i} of {qid}",
            OutputSpec.decision(),
            DecodingParams(max_tokens=1),
        )
        for i in range(n)
    )
    return SEU(qid, "f", requests, 0.0, "c")


def test_prefix_affinity_is_stable_and_spreads_prefixes() -> None:
    replicas = _replicas(4)
    placement = PrefixAffinity()
    chosen = {
        p: placement.place(replicas, prefix=p, requests=4, tokens=40) for p in map(str, range(64))
    }
    again = {
        p: placement.place(replicas, prefix=p, requests=4, tokens=40) for p in map(str, range(64))
    }
    assert chosen == again  # a prefix always ranks the same replica first
    assert {r.index for r in chosen.values() if r is not None} == {0, 1, 2, 3}


def test_prefix_affinity_spills_to_the_next_replica_past_the_load_bound() -> None:
    replicas = _replicas(2, max_requests=16, dispatches=4)
    placement = PrefixAffinity(load_factor=1.0)
    first = placement.place(replicas, prefix="hot", requests=4, tokens=40)
    assert first is not None
    first.requests, first.dispatches = 12, 3  # above the mean with the next dispatch: 8
    second = placement.place(replicas, prefix="hot", requests=4, tokens=40)
    assert second is not None and second is not first


def test_least_loaded_ignores_the_prefix() -> None:
    replicas = _replicas(3)
    replicas[0].requests = 5
    replicas[1].requests = 1
    chosen = LeastLoaded().place(replicas, prefix="x", requests=1, tokens=1)
    assert chosen is replicas[2]


def test_bad_placement_names_and_load_factors_say_what_to_use() -> None:
    with pytest.raises(ConfigError, match="least-loaded, prefix-affinity"):
        make_placement("random")
    with pytest.raises(ConfigError, match="must be >= 1"):
        make_placement("prefix-affinity", load_factor=0.5)


def test_scheduler_keeps_an_instruction_on_one_replica_with_prefix_affinity() -> None:
    executor = ManualExecutor()
    backends = [FakeBackend() for _ in range(4)]
    limits = [ReplicaLimits(6, 600) for _ in backends]  # room for all six on one replica
    # a generous load bound: every SEU of an instruction stays with its first-choice replica
    sched = Scheduler(
        backends, policy="fcfs", executor=executor, limits=limits, placement=PrefixAffinity(4.0)
    )
    for i in range(6):  # two instructions, three SEUs each, all queued at once
        sched.submit(_seu(f"q{i}", "Is it positive?" if i % 2 else "Is it late?", 4, 10 * i))
    by_prefix: dict[str, set[int]] = {}
    for dispatch in executor.started:
        by_prefix.setdefault(dispatch.requests[0].prefix, set()).add(dispatch.replica)
    assert len(executor.started) == 6
    assert all(len(replicas) == 1 for replicas in by_prefix.values())
    for dispatch in list(executor.running.values()):
        executor.finish(dispatch, [answer(r) for r in dispatch.requests])
    sched.close()


def _hit_rate(placement: str) -> tuple[float, int]:
    """Prefix hit rate over 4 SIMULATED replicas for 12 SEUs of 3 instructions, queued at once
    (a manual executor runs each dispatch on its replica's engine: deterministic). Three
    instructions on four replicas: least-loaded's round robin cannot line them up by chance."""
    backends = [SimBackend("tiny") for _ in range(4)]
    executor = ManualExecutor()
    limits = [ReplicaLimits(2, 512) for _ in backends]
    sched = Scheduler(
        backends, policy="fcfs", executor=executor, limits=limits, placement=placement
    )
    instructions = [f"Instruction {k}: " + "is this review about food? " * 12 for k in range(3)]
    futures = [sched.submit(_seu(f"q{i}", instructions[i % 3], 8, 100 * i)) for i in range(12)]
    while executor.running:
        dispatch = next(iter(executor.running.values()))
        executor.finish(dispatch, backends[dispatch.replica].complete(dispatch.requests))
    assert all(f.done() for f in futures)
    sched.close()
    stats = [b.stats() for b in backends]
    for b in backends:
        b.close()
    queried = sum(s.queried_tokens for s in stats)
    return sum(s.cached_tokens for s in stats) / queried, sum(s.finished for s in stats)


def test_prefix_affinity_raises_the_hit_rate_on_simulated_replicas() -> None:
    affinity, done_a = _hit_rate("prefix-affinity")
    spread, done_l = _hit_rate("least-loaded")
    assert done_a == done_l == 12 * 8
    assert affinity > spread
