"""The SIMULATED engine's prefix cache: a KV budget per replica in blocks, LRU eviction."""

from __future__ import annotations

import dataclasses
import json
import urllib.request
from collections import deque

import pytest

from duckdb_sem.backends.sim import SimBackend, get_profile
from duckdb_sem.backends.sim.cost_model import CostModel, SeqState
from duckdb_sem.backends.sim.engine import VirtualEngine
from duckdb_sem.backends.sim.server import SimServer
from duckdb_sem.errors import BackendError

# 200-token prompts whose first 160 tokens (10 blocks) are a prefix, 1 output token: each
# sequence needs 13 blocks (12 full prompt blocks, hashed, and one for the rest); 35 blocks.
_PROFILE = dataclasses.replace(get_profile("tiny"), kv_cache_tokens=560)


def _hashes(prefix: str, row: int, prompt: int = 200, prefix_tokens: int = 160) -> tuple[int, ...]:
    """Block hashes of a prompt: ``prefix``'s blocks, then blocks of this row alone."""
    shared = prefix_tokens // 16
    return tuple(
        hash((prefix, j)) if j < shared else hash((prefix, row, j)) for j in range(prompt // 16)
    )


def _run(model: CostModel, prefix: str, seq_id: int) -> SeqState:
    """Run one sequence with prefix ``prefix`` to completion on an otherwise idle model."""
    seq = SeqState(seq_id, 200, 1, _hashes(prefix, seq_id))
    running: list[SeqState] = []
    waiting = deque([seq])
    while waiting or running:
        assert model.step(running, waiting, 0.0) is not None
    return seq


def test_least_recently_freed_blocks_are_evicted_when_the_budget_is_full() -> None:
    model = CostModel(_PROFILE)
    assert _run(model, "A", 0).cached == 0
    assert _run(model, "B", 1).cached == 0
    assert _run(model, "A", 2).cached == 160  # its prefix's 10 blocks; its row's are new
    assert model.evictions == 0
    # C's 13 blocks: 6 never used, A's first row's 3 (2 hashed), then B's tail: its last
    # block, 2 row blocks and the last of its prefix blocks (a block is evicted, not a prefix)
    assert _run(model, "C", 3).cached == 0
    assert model.evictions == 5
    assert _run(model, "B", 4).cached == 144  # 9 of B's 10 prefix blocks are still cached
    # B's 4 new blocks were the least recently freed: A's last row and A's last prefix block
    assert model.evictions == 8
    assert _run(model, "A", 5).cached == 144


def test_blocks_of_a_running_sequence_are_never_evicted() -> None:
    model = CostModel(dataclasses.replace(_PROFILE, kv_cache_tokens=400))  # 25 blocks
    _run(model, "A", 0)
    long_a = SeqState(1, 200, 50, _hashes("A", 1))  # 16 blocks, keeps decoding while B waits
    running: list[SeqState] = []
    waiting = deque([long_a])
    model.step(running, waiting, 0.0)
    b = SeqState(2, 200, 1, _hashes("B", 2))  # 13 blocks: only 9 are free
    waiting.append(b)
    model.step(running, waiting, 0.0)
    assert list(waiting) == [b] and running == [long_a]  # B waits for A's blocks
    while waiting or running:
        model.step(running, waiting, 0.0)
    assert long_a.cached == 160 and b.cached == 0
    assert _run(model, "A", 3).cached == 160  # B took the least recently freed blocks


def test_running_sequences_share_their_common_blocks() -> None:
    # 17 blocks: a 14-block and a 13-block sequence fit only because they share 10 blocks
    model = CostModel(dataclasses.replace(_PROFILE, kv_cache_tokens=272))
    first = SeqState(0, 200, 16, _hashes("A", 0))
    running: list[SeqState] = []
    waiting = deque([first])
    model.step(running, waiting, 0.0)  # computes the whole prompt (512-token step budget)
    second = SeqState(1, 200, 2, _hashes("A", 1))
    waiting.append(second)
    model.step(running, waiting, 0.0)
    assert running[:2] == [first, second] and second.cached == 160


def test_a_sequence_admitted_in_the_same_step_hits_the_blocks_scheduled_before_it() -> None:
    # vLLM caches a block's hash when it schedules its computation (allocate_slots), so the
    # rows of one dispatch compute their shared prefix once
    model = CostModel(get_profile("tiny"))
    seqs = [SeqState(i, 200, 1, _hashes("A", i)) for i in range(3)]
    running: list[SeqState] = []
    result = model.step(running, deque(seqs), 0.0)
    assert result is not None and result.cached_tokens == 2 * 160
    assert [s.cached for s in seqs] == [0, 160, 160]
    assert result.prefill_tokens == 200 + 2 * 40


def test_without_pressure_every_repeat_is_a_hit() -> None:
    model = CostModel(get_profile("tiny"))
    for i in range(5):
        assert _run(model, "A", i).cached == (160 if i else 0)
    assert model.evictions == 0


def test_engine_stats_report_the_prefix_hit_rate_and_refuse_what_cannot_fit() -> None:
    engine = VirtualEngine(_PROFILE)
    try:
        for i in range(2):
            engine.wait(engine.submit([(200, 1, _hashes("A", i))]))
        stats = engine.stats()
        with pytest.raises(BackendError, match="does not fit the SIMULATED KV cache of 560"):
            engine.submit([(600, 1, ())])
    finally:
        engine.close()
    assert stats.queried_tokens == 400
    assert stats.cached_tokens == 160
    assert stats.prefix_hit_rate == 160 / 400
    assert stats.cached_block_tokens == (12 + 2) * 16 and stats.evicted_blocks == 0


def test_an_aborted_sequence_gives_its_blocks_back() -> None:
    engine = VirtualEngine(_PROFILE)
    try:
        model = engine._model
        (seq,) = engine.submit([(200, 100, _hashes("A", 0))])
        engine.abort([seq])
    finally:
        engine.close()
    assert model.pool.free_blocks == model.pool.num_blocks


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
    assert values["duckdb_sem_sim_evicted_blocks_total"] == 0
