"""The SIMULATED backend: deterministic answers, and a cost model that matches its profile."""

from __future__ import annotations

import math
import threading
from collections import deque

import pytest

from duckdb_sem.backends.base import RetryPolicy
from duckdb_sem.backends.registry import create_backend
from duckdb_sem.backends.sim import PROFILES, HashOracle, LookupOracle, SimBackend, get_profile
from duckdb_sem.backends.sim.cost_model import CostModel, SeqState
from duckdb_sem.errors import ConfigError
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import LLMRequest, OperatorKind


def _filters(n: int, prefix: str = "") -> list[LLMRequest]:
    return [
        build_request(OperatorKind.FILTER, f"{prefix}review number {i} was fun") for i in range(n)
    ]


def _seq(i: int, prompt: int, output: int, prefix: str = "p", prefix_tokens: int = 0) -> SeqState:
    """A sequence whose first ``prefix_tokens`` tokens' whole blocks are ``prefix``'s."""
    hashes = tuple(
        hash((prefix, j)) if (j + 1) * 16 <= prefix_tokens else hash((prefix, i, j))
        for j in range(prompt // 16)
    )
    return SeqState(i, prompt, output, hashes)


def _drain(model: CostModel, seqs: list[SeqState]) -> tuple[float, int]:
    running: list[SeqState] = []
    waiting = deque(seqs)
    now, steps = 0.0, 0
    while (result := model.step(running, waiting, now)) is not None:
        now += result.duration
        steps += 1
    return now, steps


def test_spec_answers_are_deterministic_and_follow_selectivity() -> None:
    a = create_backend("sim:default?selectivity=0.3&seed=1")
    b = create_backend("sim:default?selectivity=0.3&seed=1")
    c = create_backend("sim:default?selectivity=0.3&seed=2")
    reqs = _filters(2000)
    va = [x.value for x in a.complete(reqs)]
    assert va == [x.value for x in b.complete(reqs)]
    assert va != [x.value for x in c.complete(reqs)]
    assert 0.27 < sum(va) / len(va) < 0.33
    assert a.virtual_seconds == b.virtual_seconds > 0  # type: ignore[attr-defined]
    for backend in (a, b, c):
        backend.close()


def test_every_description_says_simulated() -> None:
    backend = SimBackend("tiny")
    assert backend.simulated
    assert backend.describe().startswith("SIMULATED")
    assert "SIMULATED" in backend.profile.summary()
    backend.close()


def test_lookup_oracle_answers_labels_and_falls_back() -> None:
    oracle = LookupOracle(
        {"great film": "fresh", "dull film": "rotten"},
        positive={"fresh"},
        fallback=HashOracle(1.0),
    )
    backend = SimBackend("tiny", oracle=oracle)
    reqs = [build_request(OperatorKind.FILTER, r) for r in ("great film", "dull film", "other")]
    assert [c.value for c in backend.complete(reqs)] == [True, False, True]
    strict = SimBackend("tiny", oracle=LookupOracle({"a": 1}))
    (missing,) = strict.complete([build_request(OperatorKind.FILTER, "b")])
    assert missing.value is None and missing.error is not None and "no label" in missing.error
    typed = SimBackend("tiny", oracle=LookupOracle({"a": "42"}))
    (value,) = typed.complete([build_request(OperatorKind.MAP, "a", output_type="INTEGER")])
    assert value.value == 42
    for each in (backend, strict, typed):
        each.close()


def test_typed_generation_parses_and_malformed_output_is_retried_then_null() -> None:
    ok = SimBackend("tiny")
    reqs = [
        build_request(OperatorKind.MAP, f"row {i}", output_type="STRUCT(a INTEGER, b VARCHAR[])")
        for i in range(20)
    ]
    assert all(isinstance(c.value, dict) and c.error is None for c in ok.complete(reqs))
    flaky = SimBackend("tiny", malformed=0.5, retry=RetryPolicy(attempts=2))
    out = flaky.complete(reqs)
    nulls = [c for c in out if c.value is None]
    # each attempt fails with probability 0.5, independently: about 1/8 stay NULL
    assert 0 < len(nulls) < 10
    assert all(c.error for c in nulls)
    assert flaky.warnings == len(nulls)
    always = SimBackend("tiny", malformed=1.0)
    assert all(c.value is None for c in always.complete(reqs[:3]))
    for backend in (ok, flaky, always):
        backend.close()


@pytest.mark.parametrize("name", sorted(set(PROFILES) - {"default"}))
def test_step_times_match_profile_numbers(name: str) -> None:
    p = get_profile(name)
    model = CostModel(p)
    assert model.step_seconds(tokens=1, decoding=1) == pytest.approx(p.itl_single_s)
    full = model.step_seconds(tokens=p.max_num_seqs, decoding=p.max_num_seqs)
    assert p.max_num_seqs / full == pytest.approx(p.decode_tokens_per_s_max)
    big = p.max_num_batched_tokens
    assert big / model.step_seconds(tokens=big, decoding=0) == pytest.approx(
        min(p.prefill_tokens_per_s, big / p.base_step_s)
    )


def test_simulated_decode_throughput_matches_profile() -> None:
    p = get_profile("default")
    out_tokens = 200
    seqs = [_seq(i, 1, out_tokens) for i in range(p.max_num_seqs)]
    seconds, _ = _drain(CostModel(p), seqs)
    measured = p.max_num_seqs * out_tokens / seconds
    assert measured == pytest.approx(p.decode_tokens_per_s_max, rel=0.02)
    lone, _ = _drain(CostModel(p), [_seq(0, 1, out_tokens)])
    assert out_tokens / lone == pytest.approx(1 / p.itl_single_s, rel=0.01)


def test_simulated_prefill_throughput_and_chunking_match_profile() -> None:
    p = get_profile("default")
    prompt = 10 * p.max_num_batched_tokens
    seconds, steps = _drain(CostModel(p), [_seq(0, prompt, 1)])
    assert steps == 10  # chunked prefill: one budget-sized chunk per step
    assert prompt / seconds == pytest.approx(p.prefill_tokens_per_s, rel=0.01)


def test_prefix_cache_skips_shared_prefix_blocks() -> None:
    p = get_profile("tiny")
    model = CostModel(p)
    running: list[SeqState] = []
    waiting = deque([_seq(0, 100, 1, "shared", 70)])
    assert model.step(running, waiting, 0.0) is not None
    later = _seq(1, 100, 1, "shared", 70)
    waiting.append(later)
    result = model.step(running, waiting, 1.0)
    assert result is not None and result.cached_tokens == 64  # whole 16-token blocks only
    assert result.prefill_tokens == 36


def test_batch_limits_and_kv_budget_are_respected() -> None:
    p = get_profile("tiny")
    model = CostModel(p)
    running: list[SeqState] = []
    waiting = deque(_seq(i, 10, 50) for i in range(3 * p.max_num_seqs))
    model.step(running, waiting, 0.0)
    assert len(running) == p.max_num_seqs
    kv = CostModel(get_profile("tiny"))
    huge = deque(_seq(i, 40_000, 1) for i in range(2))
    running2: list[SeqState] = []
    kv.step(running2, huge, 0.0)
    assert len(running2) == 1 and len(huge) == 1  # the second does not fit the KV cache


def test_time_scale_sleeps_scaled_virtual_time() -> None:
    slept: list[float] = []
    backend = SimBackend("tiny", time_scale=0.5)
    backend.engine._sleep = slept.append  # count instead of sleeping
    backend.complete(_filters(40))
    assert math.fsum(slept) == pytest.approx(0.5 * backend.virtual_seconds)
    backend.close()


def test_concurrent_callers_share_steps_and_load_and_abort_work() -> None:
    gate = threading.Event()
    backend = SimBackend("tiny", time_scale=1.0)
    backend.engine._sleep = lambda _s: gate.wait(5)  # hold every step until released
    reqs = [build_request(OperatorKind.MAP, f"row {i}", max_tokens=64) for i in range(40)]
    results: list[list[object]] = []
    worker = threading.Thread(target=lambda: results.append(backend.complete(reqs)))
    worker.start()
    for _ in range(200):
        load = backend.load()
        if load.running:
            break
        threading.Event().wait(0.01)
    # the first step is bounded by the token budget (512), the rest wait in the queue
    assert 0 < load.running <= get_profile("tiny").max_num_seqs
    assert load.queued == 40 - load.running
    backend.abort(reqs)
    gate.set()
    worker.join(5)
    assert not worker.is_alive()
    assert all(getattr(c, "error", "") == "aborted (SIMULATED)" for c in results[0])
    assert backend.stats().aborted == 40
    backend.close()


def test_bad_specs_give_clear_errors() -> None:
    with pytest.raises(ConfigError, match="unknown sim profile"):
        create_backend("sim:nope")
    with pytest.raises(ConfigError, match="between 0 and 1"):
        create_backend("sim:default?selectivity=2")
    with pytest.raises(ConfigError, match="must be a number"):
        create_backend("sim:default?time_scale=fast")
