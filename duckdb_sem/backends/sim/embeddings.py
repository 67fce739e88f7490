"""SIMULATED embeddings: feature-hashed words, deterministic, no model.

A text's vector is the signed hash of each lower-cased word (and of each pair of adjacent
words) into ``dims`` buckets, L2-normalized: texts sharing words have a positive cosine, texts
sharing none have 0. It stands in for an embedding model where only determinism and speed
matter (tests, the sim server's ``/v1/embeddings``, GPU-scale benchmarks); it knows no synonyms.
Every spec and server that returns these vectors says SIMULATED.

Example:
    >>> a, b, c = (hashed_embedding(t, 64) for t in ("red apple", "red apples", "blue sky"))
    >>> round(sum(x * y for x, y in zip(a, b)), 2) > round(sum(x * y for x, y in zip(a, c)), 2)
    True
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from duckdb_sem.backends.base import Answers
from duckdb_sem.backends.embedder import Embedder
from duckdb_sem.backends.registry import BackendSpec, SpecOption

__all__ = ["OPTIONS", "SIM_EMBED_MODEL", "SimEmbedder", "from_spec", "hashed_embedding"]

SIM_EMBED_MODEL = "SIMULATED-hashed-words"
_WORD = re.compile(r"[a-z0-9]+")

OPTIONS = (SpecOption("dims", "vector length (default 384)", True),)


def hashed_embedding(text: str, dims: int = 384) -> list[float]:
    """The SIMULATED vector of ``text`` (unit length; all zeros for a text without words)."""
    words = _WORD.findall(text.lower())
    features = words + [f"{a} {b}" for a, b in itertools.pairwise(words)]
    vector = [0.0] * dims
    for feature in features:
        digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
        bucket = int.from_bytes(digest[:4], "little") % dims
        vector[bucket] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


@dataclass(frozen=True, slots=True, kw_only=True)
class SimEmbedAnswers(Answers):
    dims: int = 384


class SimEmbedder(Embedder):
    """``sim-embed:``: :func:`hashed_embedding` in process, labelled SIMULATED."""

    simulated = True

    def __init__(self, *, dims: int = 384, spec: str = "sim-embed:") -> None:
        self.spec = spec
        self.dimensions = dims
        self.answers = SimEmbedAnswers(kind="sim-embed", model=SIM_EMBED_MODEL, dims=dims)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [hashed_embedding(t, self.dimensions) for t in texts]


def from_spec(spec: BackendSpec) -> SimEmbedder:
    return SimEmbedder(dims=max(2, spec.int_option("dims", 384)), spec=spec.raw)
