"""``openai-embed:`` under a server's requests-per-minute limit, against the SIMULATED server.

The sim server answers ``/v1/embeddings`` over its limit with 429 and ``Retry-After``; a client
with ``?rpm=`` under that limit never meets one, and a client without a limit has its refused
requests retried after the wait to the same vectors (the sim's vectors are a pure function of
the text, :func:`~duckdb_sem.backends.sim.embeddings.hashed_embedding`).
"""

from __future__ import annotations

import httpx
import pytest

from duckdb_sem.backends.openai_embed import OpenAIEmbedder
from duckdb_sem.backends.rate_limit import RateLimit, embed_cost
from duckdb_sem.backends.registry import create_backend
from duckdb_sem.backends.sim.backend import create
from duckdb_sem.backends.sim.embeddings import hashed_embedding
from duckdb_sem.backends.sim.server import SimServer

pytestmark = pytest.mark.integration

TEXTS = [f"review number {i} of a film" for i in range(40)]


def _served(limit: RateLimit) -> SimServer:
    return SimServer(create("sim:default?seed=3"), rate_limit=limit).start()


def _embed(server: SimServer, options: str) -> tuple[OpenAIEmbedder, list[list[float]]]:
    """Embed TEXTS two to a request (20 requests, after the dimension probe)."""
    embedder = create_backend(f"openai-embed:{server.base_url}?batch=2{options}")
    assert isinstance(embedder, OpenAIEmbedder)
    vectors: list[list[float]] = []
    for at in range(0, len(TEXTS), 2):
        vectors += embedder.embed(TEXTS[at : at + 2])
    return embedder, vectors


def _close(server: SimServer, embedder: OpenAIEmbedder | None) -> None:
    if embedder is not None:
        embedder.close()
    server.close()
    server.backend.close()


def test_server_refuses_embeddings_over_its_limit_with_retry_after() -> None:
    server = _served(RateLimit(rpm=60))  # a bucket of one request
    body = {"input": ["one text"]}
    try:
        with httpx.Client(timeout=10) as client:
            first = client.post(server.base_url + "/embeddings", json=body)
            second = client.post(server.base_url + "/embeddings", json=body)
        assert first.status_code == 200
        assert second.status_code == 429 and second.headers["retry-after"] == "1"
        assert "rate limit" in second.json()["error"]["message"]
        assert server.rate_limited == 1 and server.embedded == 1
    finally:
        _close(server, None)


def test_client_under_the_server_limit_sees_no_429() -> None:
    server = _served(RateLimit(rpm=600))  # 10 a second
    embedder = None
    try:
        embedder, vectors = _embed(server, "&rpm=480")  # 8 a second
        assert vectors == [hashed_embedding(t) for t in TEXTS]
        assert server.rate_limited == 0 and server.embedded == 21  # the probe, then 20
        assert embedder.rate_limiter is not None and embedder.rate_limiter.waited_s > 0
    finally:
        _close(server, embedder)


def test_without_a_client_limit_429s_are_retried_to_the_same_vectors() -> None:
    server = _served(RateLimit(rpm=600))
    embedder = None
    try:
        embedder, vectors = _embed(server, "")
        assert embedder.rate_limiter is None
        assert vectors == [hashed_embedding(t) for t in TEXTS]  # none lost, none wrong
        assert server.rate_limited > 0  # the burst was refused in part, then retried
        assert server.embedded == 21
    finally:
        _close(server, embedder)


def test_client_tokens_limit_under_the_servers_sees_no_429() -> None:
    per_second = 6 * embed_cost({"input": TEXTS[:2]})  # about six requests a second
    server = _served(RateLimit(tpm=per_second * 60))
    embedder = None
    try:
        embedder, vectors = _embed(server, f"&tpm={per_second * 60 * 0.75}")
        assert vectors == [hashed_embedding(t) for t in TEXTS]
        assert server.rate_limited == 0 and server.embedded == 21
    finally:
        _close(server, embedder)
