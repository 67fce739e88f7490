"""``Embeddings``: texts to vectors through the embedding model's scheduler, cached and counted.

The embedding model is a backend (:mod:`duckdb_sem.backends.embedder`) with a scheduler of its
own (``scheduler.shared``: one per identity per process, so every connection's embedding work
is batched, fused and cached together). It is built on first use, not at ``connect()``: a
session that never embeds never loads the model. Per call, each distinct non-NULL text is asked
once per query (the query's memo), the rest go as SEUs of ``batch_size`` texts; the query's
counters get ``embed_calls`` (virtual: texts asked), ``embed_physical_calls`` (texts the model
ran) and ``embed_cache_hits``, apart from the LLM counters, and budgets do not count them.

With a scheduler sidecar (``DUCKDB_SEM_SCHEDULER``) embeddings still run in this process, on
the spec of ``DUCKDB_SEM_EMBED_BACKEND``.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from duckdb_sem.backends.base import Backend
from duckdb_sem.backends.embedder import embed_request
from duckdb_sem.backends.registry import parse_spec
from duckdb_sem.config import INPROCESS_SCHEDULER, Settings
from duckdb_sem.errors import ConfigError
from duckdb_sem.runtime.context import QueryContext
from duckdb_sem.runtime.submit import EMBEDDINGS, submit
from duckdb_sem.scheduler.seu import SchedulerClient
from duckdb_sem.scheduler.shared import scheduler_for

__all__ = ["Embeddings"]

#: the bundled all-MiniLM-L6-v2's vector length (``minilm:``)
_BUNDLED_DIMENSIONS = 384


class Embeddings:
    """One session's way to the embedding model (thread-safe; the model is built lazily)."""

    def __init__(
        self, settings: Settings, *, backend: Backend | None = None, batch_size: int = 256
    ) -> None:
        self._settings = settings
        self._backend = backend  # a caller's Embedder object; None: built from the spec
        self._client: SchedulerClient | None = None
        self.batch_size = max(1, batch_size)
        self._lock = threading.Lock()

    def another(self) -> Embeddings:
        """The same model for another session (a cursor): a handle of its own, closed apart."""
        return Embeddings(self._settings, backend=self._backend, batch_size=self.batch_size)

    @property
    def spec(self) -> str:
        return self._backend.spec if self._backend is not None else self._settings.embed_backend

    @property
    def client(self) -> SchedulerClient:
        with self._lock:
            if self._client is None:
                own = dataclasses.replace(
                    self._settings, backend=self.spec, scheduler_url=INPROCESS_SCHEDULER
                )
                self._client = scheduler_for(own, self._backend)
                backend = _backend(self._client)
                if backend is not None and not hasattr(backend, "dimensions"):
                    self._client.close()
                    self._client = None
                    raise ConfigError(
                        f"embedding backend {own.backend!r} is not an embedding model; "
                        "use minilm:, openai-embed:http://HOST/v1?model=NAME or sim-embed:"
                    )
            return self._client

    def describe(self) -> str:
        """The embedding model as EXPLAIN shows it (SIMULATED when it is)."""
        backend = _backend(self.client)
        return backend.describe() if backend is not None else self.client.backend_id

    def embed(self, texts: Sequence[str | None], *, query: QueryContext) -> np.ndarray:
        """One unit-length float32 row per text (zeros for NULL), in order."""
        client = self.client
        backend_id = client.backend_id
        requests = {t: embed_request(t) for t in texts if t is not None}
        sigs = {t: r.signature(backend_id) for t, r in requests.items()}
        got: dict[str, np.ndarray] = {}
        todo = []
        for text, sig in sigs.items():
            hit = query.memo.get(sig)
            if isinstance(hit, np.ndarray):
                got[text] = hit
            else:
                todo.append(text)
        asked = sum(1 for t in texts if t is not None)
        query.add(embed_calls=asked)
        items = [(sigs[t], requests[t]) for t in todo]
        texts_of = {sigs[t]: t for t in todo}
        for sig, completion, _ in submit(client, items, query=query, label="sem_embed",
                                         ledger=EMBEDDINGS, batch_size=self.batch_size):  # fmt: skip
            if completion.value is None:
                raise ConfigError(
                    f"{self.spec}: no vector for a text ({completion.error or 'no value'})"
                )
            vector = np.asarray(completion.value, dtype=np.float32)
            query.memo[sig] = vector
            got[texts_of[sig]] = vector
        dims = len(next(iter(got.values()))) if got else self.dimensions()
        out = np.zeros((len(texts), dims), dtype=np.float32)
        for i, maybe in enumerate(texts):
            if maybe is not None:
                out[i] = got[maybe]
        return out

    def dimensions(self) -> int:
        backend = _backend(self.client)
        return int(getattr(backend, "dimensions", 384))

    def declared_dimensions(self) -> int | None:
        """The vector length known without building the model, so ``sem_embed`` can be
        declared ``FLOAT[n]`` at ``connect()`` without loading it: the bundled MiniLM's 384,
        ``sim-embed:?dims=N``'s N, a model already built; None when only the model can tell
        (another MiniLM folder, a server)."""
        if self._backend is not None or self._client is not None:
            return self.dimensions()
        try:
            spec = parse_spec(self.spec)
        except ConfigError:
            return None  # a bad spec is reported when the model is first needed, as before
        if spec.kind == "minilm" and not spec.target:
            return _BUNDLED_DIMENSIONS
        if spec.kind == "sim-embed":
            return max(2, spec.int_option("dims", _BUNDLED_DIMENSIONS))
        return None

    def close(self) -> None:
        """Release this object's share of the embedding scheduler (if it opened one)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()


def _backend(client: SchedulerClient) -> Any:
    backends = getattr(client, "backends", None)
    return backends[0] if backends else None
