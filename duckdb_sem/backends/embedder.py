"""Embedding models behind the backend interface: ``embed(texts) -> vectors``.

An :class:`Embedder` is a :class:`~duckdb_sem.backends.base.Backend` whose only task is
``Task.EMBED``: each request's ``row`` is a text, each completion's ``value`` its vector (a
list of floats, L2-normalized, rounded to :data:`DIGITS` decimals so a vector read back from
the cache equals the one first computed). Being a backend, an embedder gets everything the
LLM backends get without code of its own: one scheduler per identity per process (batches,
fusion of identical texts across queries, cancellation), the persistent cache keyed by
signature (the embedder's identity + the text), and the query's virtual/physical accounting
(``runtime.embeddings``). Subclasses implement :meth:`Embedder.embed`.

==============  =========================================================  =====================
kind            spec                                                       what
==============  =========================================================  =====================
``minilm``      ``minilm:`` or ``minilm:/path/to/st-folder?threads=2``     sentence-transformers
                                                                           all-MiniLM-L6-v2,
                                                                           embedded (default)
``openai-embed``  ``openai-embed:http://HOST:PORT/v1?model=NAME``          any ``/v1/embeddings``
``sim-embed``   ``sim-embed:?dims=384``                                    SIMULATED: hashed
                                                                           words, deterministic
==============  =========================================================  =====================

Example:
    >>> vectors = [[3.0, 4.0]]
    >>> normalized(vectors)
    [[0.6, 0.8]]
"""

from __future__ import annotations

import abc
from collections.abc import Sequence

import numpy as np

from duckdb_sem.backends.base import Backend, Capacity
from duckdb_sem.backends.tokens import estimate_tokens
from duckdb_sem.errors import BackendError
from duckdb_sem.llm.request import Completion, LLMRequest, OperatorKind, OutputSpec, Task

__all__ = ["DIGITS", "Embedder", "embed_request", "normalized"]

#: decimals kept of each vector component (cosine similarities move by < 1e-5)
DIGITS = 6


def embed_request(text: str) -> LLMRequest:
    """The request that asks an embedder for the vector of ``text``."""
    return LLMRequest(OperatorKind.EMBED, "", text, OutputSpec(Task.EMBED, "FLOAT[]"))


def normalized(vectors: Sequence[Sequence[float]] | np.ndarray) -> list[list[float]]:
    """Each vector scaled to length 1 and rounded to :data:`DIGITS` (a zero vector stays 0)."""
    matrix = np.asarray(vectors, dtype=np.float64)
    if matrix.ndim != 2:
        matrix = matrix.reshape(len(matrix), -1)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    rounded: list[list[float]] = np.round(matrix / norms, DIGITS).tolist()
    return rounded


class Embedder(Backend):
    """Base of every embedding backend; ``complete`` answers ``Task.EMBED`` requests only."""

    #: length of every vector this model returns
    dimensions: int

    @abc.abstractmethod
    def embed(self, texts: Sequence[str]) -> Sequence[Sequence[float]] | np.ndarray:
        """One vector per text, in order (blocking, thread-safe); not yet normalized."""

    def complete(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        wrong = [r for r in requests if r.output.task is not Task.EMBED]
        if wrong:
            raise BackendError(
                f"{self.spec} is an embedding model and answers only embeddings, not "
                f"{wrong[0].output.task.value} requests; set DUCKDB_SEM_BACKEND to an LLM "
                "(e.g. llama:) and DUCKDB_SEM_EMBED_BACKEND to this spec"
            )
        if not requests:
            return []
        vectors = normalized(self.embed([r.row for r in requests]))
        if len(vectors) != len(requests) or any(len(v) != self.dimensions for v in vectors):
            raise BackendError(
                f"{self.spec}: expected {len(requests)} vectors of {self.dimensions} numbers, "
                f"got {len(vectors)} of {sorted({len(v) for v in vectors})}"
            )
        return [
            Completion(vector, "", self.count_tokens(r.row), 0)
            for r, vector in zip(requests, vectors, strict=True)
        ]

    def capacity(self) -> Capacity:
        return Capacity(max_batch=64)

    def count_tokens(self, text: str) -> int:
        return estimate_tokens(text)
