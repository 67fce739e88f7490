"""Embedding backends: the SIMULATED in-process one, the /v1/embeddings client against the
SIMULATED server over a real socket, the contract every embedder keeps, and the real MiniLM."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import numpy as np
import pytest
from sim_serving import sim_serving

from duckdb_sem.backends.embedder import embed_request, normalized
from duckdb_sem.backends.openai_embed import OpenAIEmbedder, read_embeddings
from duckdb_sem.backends.registry import create_backend
from duckdb_sem.backends.sim.embeddings import SimEmbedder, hashed_embedding
from duckdb_sem.backends.sim.server import SimServer
from duckdb_sem.errors import BackendError, ConfigError
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import OperatorKind, Task


@pytest.fixture
def server() -> Iterator[SimServer]:
    with sim_serving("sim:default?seed=1") as server:
        yield server


def test_sim_embedder_is_deterministic_unit_length_and_labelled() -> None:
    embedder = create_backend("sim-embed:?dims=64")
    assert isinstance(embedder, SimEmbedder) and embedder.simulated
    assert "SIMULATED" in embedder.describe()
    (a,) = embedder.complete([embed_request("Red apples, ripe")])
    (b,) = embedder.complete([embed_request("Red apples, ripe")])
    assert a.value == b.value and len(a.value) == 64
    assert np.linalg.norm(a.value) == pytest.approx(1.0, abs=1e-5)
    assert a.value == normalized([hashed_embedding("Red apples, ripe", 64)])[0]


def test_embedders_refuse_llm_work_and_name_the_fix() -> None:
    embedder = create_backend("sim-embed:")
    with pytest.raises(BackendError, match="DUCKDB_SEM_EMBED_BACKEND"):
        embedder.complete([build_request(OperatorKind.FILTER, "is it good?")])


def test_embed_signature_is_the_model_and_the_text() -> None:
    request = embed_request("hello")
    assert request.output.task is Task.EMBED
    assert request.signature("m1") == embed_request("hello").signature("m1")
    assert request.signature("m1") != request.signature("m2")
    assert request.signature("m1") != embed_request("hello!").signature("m1")


def test_openai_embed_client_over_the_sim_server(server: SimServer) -> None:
    embedder = create_backend(f"openai-embed:{server.base_url}")
    assert isinstance(embedder, OpenAIEmbedder)
    try:
        assert embedder.simulated and embedder.dimensions == 384
        got = embedder.complete([embed_request("a cat"), embed_request("stock prices")])
        assert [len(c.value) for c in got] == [384, 384]
        assert got[0].value == normalized([hashed_embedding("a cat")])[0]
    finally:
        embedder.close()
    raw = httpx.post(server.base_url + "/embeddings", json={"input": 3}, timeout=5)
    assert raw.status_code == 400 and "SIMULATED" in raw.text


def test_read_embeddings_orders_by_index_and_rejects_garbage() -> None:
    data = {"data": [{"index": 1, "embedding": [1, 2]}, {"index": 0, "embedding": [3, 4]}]}
    assert read_embeddings(data, 2) == [[3.0, 4.0], [1.0, 2.0]]
    with pytest.raises(ValueError, match="1 vectors for 2"):
        read_embeddings({"data": [{"embedding": [1]}]}, 2)
    with pytest.raises(ValueError, match="not an embeddings answer"):
        read_embeddings({"choices": []}, 1)


def test_openai_embed_needs_a_url() -> None:
    with pytest.raises(ConfigError, match="openai-embed:http://"):
        create_backend("openai-embed:localhost")


@pytest.mark.model
@pytest.mark.slow
def test_minilm_ranks_a_paraphrase_above_unrelated_sentences() -> None:
    embedder = create_backend("minilm:?threads=1")
    try:
        assert embedder.describe().startswith("minilm:") and not embedder.simulated
        texts = [
            "A kitten is sleeping on the sofa.",
            "A young cat naps on the couch.",
            "The central bank raised interest rates.",
            "Heavy rain flooded the highway.",
        ]
        vectors = np.array([c.value for c in embedder.complete([embed_request(t) for t in texts])])
        assert vectors.shape == (4, 384)
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
        sims = vectors[0] @ vectors[1:].T
        assert sims[0] > 0.5 > max(sims[1:])  # the paraphrase, well above both others
    finally:
        embedder.close()
