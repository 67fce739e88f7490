"""Prompt tokens a backend took from its prefix cache reach ``con.stats()`` and EXPLAIN ANALYZE:
on the SIMULATED backend (its engine's own count), over HTTP (``usage.prompt_tokens_details``),
and through the sidecar's wire format."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

import duckdb_sem
from duckdb_sem.backends.openai_wire import read_completion
from duckdb_sem.backends.sim.backend import SimBackend, create
from duckdb_sem.backends.sim.server import SimServer
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import Completion, OperatorKind
from duckdb_sem.scheduler.protocol import decode_result, encode_result
from duckdb_sem.scheduler.seu import Served, SEUResult

QUERY = "SELECT review_id FROM reviews WHERE sem_filter('{text} is a positive review of the movie')"


@pytest.fixture
def sim() -> Iterator[SimBackend]:
    backend = create("sim:default?selectivity=0.5&seed=3")
    yield backend
    backend.close()


def test_the_sim_engine_s_prefix_hits_are_the_query_s(sim: SimBackend) -> None:
    con = duckdb_sem.connect(backend=sim, cache="off")
    duckdb_sem.load_demo(con)
    con.sql(QUERY).fetchall()
    stats, engine = con.stats(), sim.stats()
    assert stats.physical_calls > 100
    assert stats.physical_prompt_tokens == engine.queried_tokens
    assert stats.physical_cached_tokens == engine.cached_tokens > 0
    assert stats.prefix_hit_rate == pytest.approx(engine.prefix_hit_rate)
    assert 0.1 < stats.prefix_hit_rate < 1.0  # the instruction is shared, the review is not
    assert stats.as_dict()["prefix_hit_rate"] == stats.prefix_hit_rate
    con.close()


def test_explain_analyze_prints_the_hits_per_query_and_per_operator(sim: SimBackend) -> None:
    con = duckdb_sem.connect(backend=sim, cache="off")
    duckdb_sem.load_demo(con)
    text = con.explain_semantic(QUERY, analyze=True)
    stats = con.stats()
    share = f"{stats.prefix_hit_rate:.0%}"
    cached = f"{stats.physical_cached_tokens:,}"
    assert f"({cached} prompt tokens from the backend's prefix cache, {share})" in text
    (line,) = [x for x in text.splitlines() if "SemFilter" in x and "actual rows=" in x]
    assert f"prefix-cached={cached}/{stats.physical_prompt_tokens:,} ({share})" in line
    con.close()


def test_no_cache_line_without_backend_work() -> None:
    con = duckdb_sem.connect(backend="test:", cache="off")
    duckdb_sem.load_demo(con)
    text = con.explain_semantic(QUERY, analyze=True)
    # the rule backend keeps no prefix cache: 0 of the tokens sent, and said so
    assert "(0 prompt tokens from the backend's prefix cache, 0%)" in text
    assert con.stats().prefix_hit_rate == 0.0
    con.close()


@pytest.mark.integration
def test_cached_tokens_come_over_http_from_the_sim_server(sim: SimBackend) -> None:
    server = SimServer(sim).start()
    try:
        con = duckdb_sem.connect(backend=f"openai:{server.base_url}", cache="off")
        duckdb_sem.load_demo(con)
        con.sql(QUERY).fetchall()
        stats, engine = con.stats(), sim.stats()
        # the engine also ran the client's calibration rows (content-free, per template)
        assert 0 < stats.physical_cached_tokens <= engine.cached_tokens
        assert stats.prefix_hit_rate == pytest.approx(engine.prefix_hit_rate, abs=0.05)
        con.close()
    finally:
        server.close()


def test_read_completion_takes_usage_prompt_tokens_details() -> None:
    request = build_request(OperatorKind.MAP, "a row", output_type="VARCHAR")
    answer = {"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}],
              "usage": {"prompt_tokens": 40, "completion_tokens": 2,
                        "prompt_tokens_details": {"cached_tokens": 32}}}  # fmt: skip
    assert read_completion(request, answer, threshold=0.0).cached_tokens == 32
    del answer["usage"]["prompt_tokens_details"]  # type: ignore[attr-defined]
    assert read_completion(request, answer, threshold=0.0).cached_tokens == 0


def test_the_sidecar_carries_cached_tokens_and_reads_an_older_sidecar() -> None:
    result = SEUResult((Completion(True, "yes", 40, 1, 0.5, None, 32),), (Served.BACKEND,))
    assert decode_result(encode_result(result)).completions[0].cached_tokens == 32
    body = json.loads(encode_result(result))
    body["completions"] = [c[:6] for c in body["completions"]]  # before cached_tokens
    old = decode_result(json.dumps(body).encode())
    assert old.completions[0] == Completion(True, "yes", 40, 1, 0.5, None)


def test_a_join_s_line_shows_its_own_hits(sim: SimBackend) -> None:
    con = duckdb_sem.connect(backend=sim, cache="off")
    con.execute("CREATE TABLE r AS SELECT i AS id, 'review ' || i AS text FROM range(40) t(i)")
    con.execute("CREATE TABLE p AS SELECT i AS pid, 'plot ' || i AS plot FROM range(5) t(i)")
    query = "SELECT r.id, p.pid FROM r JOIN p ON sem_join('Review: {r.text} Plot: {p.plot}')"
    text = con.explain_semantic(query, analyze=True)
    (line,) = [x for x in text.splitlines() if "SemJoin" in x and "actual rows=" in x]
    stats = con.stats()
    assert stats.physical_calls == 200 and stats.physical_cached_tokens > 0
    assert (
        f"prefix-cached={stats.physical_cached_tokens:,}/{stats.physical_prompt_tokens:,}" in line
    )
    con.close()
