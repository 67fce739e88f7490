"""The SIMULATED engine's prefix cache: a KV budget per replica with LRU eviction."""

from __future__ import annotations

import dataclasses
import json
import urllib.request
from collections import deque

from duckdb_sem.backends.sim import SimBackend, get_profile
from duckdb_sem.backends.sim.cost_model import CostModel, SeqState
from duckdb_sem.backends.sim.engine import VirtualEngine
from duckdb_sem.backends.sim.server import SimServer

# 200-token prompts whose 160-token prefix is cached, 1 output token: two cached prefixes and
# one running sequence (201 KV tokens) fit in 560, a third prefix does not.
_PROFILE = dataclasses.replace(get_profile("tiny"), kv_cache_tokens=560)


def _run(model: CostModel, key: str, seq_id: int) -> SeqState:
    """Run one sequence with prefix ``key`` to completion on an otherwise idle model."""
    seq = SeqState(seq_id, 200, 1, key, 160)
    running: list[SeqState] = []
    waiting = deque([seq])
    while waiting or running:
        assert model.step(running, waiting, 0.0) is not None
    return seq


def test_least_recently_used_prefix_is_evicted_when_the_budget_is_full() -> None:
    model = CostModel(_PROFILE)
    assert _run(model, "A", 0).cached == 0
    assert _run(model, "B", 1).cached == 0
    assert _run(model, "A", 2).cached == 160  # a hit: A is now the most recently used
    assert model.cached_prefixes() == ["B", "A"]
    _run(model, "C", 3)  # no room for a third prefix: B, the LRU one, goes
    assert model.cached_prefixes() == ["A", "C"]
    assert model.evictions == 1
    assert _run(model, "B", 4).cached == 0  # evicted: computed again
    assert model.cached_prefixes() == ["C", "B"]  # caching B again evicted A
    assert _run(model, "C", 5).cached == 160


def test_a_prefix_shared_by_a_running_sequence_is_never_evicted() -> None:
    model = CostModel(dataclasses.replace(_PROFILE, kv_cache_tokens=400))
    _run(model, "A", 0)
    long_a = SeqState(1, 200, 50, "A", 160)  # keeps decoding while B arrives
    running: list[SeqState] = []
    waiting = deque([long_a])
    model.step(running, waiting, 0.0)
    waiting.append(SeqState(2, 100, 1, "B", 80))
    while waiting or running:
        model.step(running, waiting, 0.0)
    assert long_a.cached == 160
    assert "A" in model.cached_prefixes()
    assert model.evictions == 0


def test_without_pressure_every_repeat_is_a_hit() -> None:
    model = CostModel(get_profile("tiny"))
    for i in range(5):
        _run(model, "A", i)
    assert model.evictions == 0 and model.cached_prefixes() == ["A"]


def test_engine_stats_report_the_prefix_hit_rate() -> None:
    engine = VirtualEngine(_PROFILE)
    try:
        for shapes in ([(200, 1, "A", 160)], [(200, 1, "A", 160)]):
            engine.wait(engine.submit(shapes))
        stats = engine.stats()
    finally:
        engine.close()
    assert stats.queried_tokens == 400
    assert stats.cached_tokens == 160
    assert stats.prefix_hit_rate == 160 / 400
    assert stats.cached_prefix_tokens == 160 and stats.prefix_evictions == 0


def test_sim_server_metrics_expose_vllm_prefix_cache_counters() -> None:
    server = SimServer(SimBackend("tiny")).start()
    try:
        body = {
            "messages": [
                {"role": "system", "content": "Summarize the review in one line. " * 20},
                {"role": "user", "content": "the food was great"},
            ],
            "max_tokens": 4,
        }
        for _ in range(2):
            req = urllib.request.Request(
                f"{server.base_url}/chat/completions",
                data=json.dumps(body).encode(),
                headers={"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(req, timeout=10) as resp:
                assert resp.status == 200
        host, port = server.address
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
    finally:
        server.close()
        server.backend.close()
    values = {
        line.split("{")[0].split(" ")[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }
    assert values["vllm:prefix_cache_queries_total"] > values["vllm:prefix_cache_hits_total"] > 0
    assert values["duckdb_sem_sim_prefix_evictions_total"] == 0
