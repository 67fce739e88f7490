"""The cheap scorers of a filter cascade: a small model's log-odds, or an embedding similarity.

A helper gives each row of a ``sem_filter`` a score, higher for "more likely yes"; what the
scores mean does not matter, only their order: ``runtime.cascade`` learns the thresholds on
them from target-labelled rows.

- :class:`ModelHelper`: the filter's own prompt on a small model (the estimator backend, or any
  backend spec: ``DUCKDB_SEM_FILTER_HELPER=llama:/path/model.gguf``), scored from the answer
  tokens' calibrated log-probabilities (``Completion.score``). Its requests go through that
  model's scheduler as SEUs of the query (cached, fused, cancellable), counted apart as
  ``helper_calls`` / ``helper_cache_hits`` in ``con.stats()``.
- :class:`EmbedHelper`: the cosine similarity of the row's text to the template's own words
  (``"{text} is a positive review"`` -> ``"is a positive review"``), on the session's embedding
  model (``runtime.embeddings``; counted as ``embed_calls``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from duckdb_sem.errors import ConfigError
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.render import render_column
from duckdb_sem.llm.request import Completion, LLMRequest, OperatorKind
from duckdb_sem.llm.template import parse_template
from duckdb_sem.runtime.context import QueryContext
from duckdb_sem.runtime.embeddings import Embeddings
from duckdb_sem.runtime.submit import HELPER, submit
from duckdb_sem.scheduler.seu import SchedulerClient

__all__ = ["HELPER_LABEL", "EmbedHelper", "Helper", "ModelHelper", "Sides", "choose_helper"]

#: the operator label of the helper's SEUs (metrics, ``duckdb-sem top``)
HELPER_LABEL = "cascade helper"


#: for a sem_join's candidate pairs: which arguments come from the left side, which from the
#: right (an embedding helper compares the two; a model helper asks the join's question)
Sides = tuple[tuple[int, ...], tuple[int, ...]]


class Helper(Protocol):
    """Scores the rows of a filter call (or a join's candidate pairs, with ``sides``); None
    where a row has no score (a NULL input)."""

    name: str

    def scores(
        self,
        template: str,
        args: Sequence[pa.Array],
        query: QueryContext,
        *,
        sides: Sides | None = None,
    ) -> list[float | None]: ...


def _rendered(template: str, args: Sequence[pa.Array]) -> list[str | None]:
    parsed = parse_template(template)
    columns = [render_column(a) for a in args]
    rows = len(args[0]) if args else 0
    out: list[str | None] = []
    for i in range(rows):
        values = [col[i] for col in columns]
        out.append(None if any(v is None for v in values) else parsed.render(values))  # type: ignore[arg-type]
    return out


class ModelHelper:
    """The filter's prompt on a small model, scored by its calibrated log-odds."""

    def __init__(self, client: SchedulerClient, *, batch_size: int = 64) -> None:
        self.client = client
        self.name = client.backend_id
        self.batch_size = batch_size

    def scores(
        self,
        template: str,
        args: Sequence[pa.Array],
        query: QueryContext,
        *,
        sides: Sides | None = None,
    ) -> list[float | None]:
        parsed = parse_template(template)
        kind = OperatorKind.FILTER if sides is None else OperatorKind.JOIN
        requests = [
            None if r is None else build_request(kind, r, template=parsed)
            for r in _rendered(template, args)
        ]
        backend_id = self.client.backend_id
        sigs = [None if r is None else r.signature(backend_id) for r in requests]
        todo: dict[str, LLMRequest] = {}
        for sig, request in zip(sigs, requests, strict=True):
            if sig is not None and request is not None and query.memo.get(sig) is None:
                todo[sig] = request
        query.add(helper_calls=sum(1 for s in sigs if s is not None))
        for sig, completion, _ in submit(self.client, list(todo.items()), query=query,
                                         label=HELPER_LABEL, ledger=HELPER,
                                         batch_size=self.batch_size):  # fmt: skip
            query.memo[sig] = completion
        out: list[float | None] = []
        for sig in sigs:
            hit = None if sig is None else query.memo.get(sig)
            out.append(_score(hit) if isinstance(hit, Completion) else None)
        return out


def _score(completion: Completion) -> float | None:
    if completion.score is not None:
        return float(completion.score)
    if completion.value is None:
        return None
    return 1.0 if completion.value else -1.0  # a model that answers without log-probabilities


class EmbedHelper:
    """Cosine similarity of each row's rendered fields to the template's own words."""

    def __init__(self, embeddings: Embeddings) -> None:
        self.embeddings = embeddings
        self.name = f"embed {embeddings.spec}"

    def scores(
        self,
        template: str,
        args: Sequence[pa.Array],
        query: QueryContext,
        *,
        sides: Sides | None = None,
    ) -> list[float | None]:
        columns = [render_column(a) for a in args]
        if sides is not None:  # a join's pairs: how similar the two sides' texts are
            left, right = [_joined([columns[i] for i in side]) for side in sides]
            both = [None if a is None or b is None else (a, b) for a, b in zip(left, right,
                    strict=True)]  # fmt: skip
            kept = [p for p in both if p is not None]
            if not kept:
                return [None] * len(both)
            vectors = self.embeddings.embed([t for p in kept for t in p], query=query)
            sims = iter((vectors[0::2] * vectors[1::2]).sum(axis=1).tolist())
            return [None if p is None else float(next(sims)) for p in both]
        words = re.sub(r"\s+", " ", re.sub(r"\{\d+\}", " ", template)).strip() or template
        texts = _joined(columns)
        vectors = self.embeddings.embed([words, *texts], query=query)
        sims = vectors[1:] @ vectors[0]
        return [None if t is None else float(s) for t, s in zip(texts, sims.tolist(), strict=True)]


def _joined(columns: Sequence[Sequence[str | None]]) -> list[str | None]:
    return [None if any(v is None for v in row) else "\n".join(row)
            for row in zip(*columns, strict=True)]  # fmt: skip


def choose_helper(name: str, *, estimator: SchedulerClient | None,
                  named: SchedulerClient | None, engine: Any) -> Helper:  # fmt: skip
    """The helper ``name`` asks for (``auto``: the estimator backend if the connection has one,
    else embeddings; ``estimator``; ``embed``; a backend spec, whose client is ``named``)."""
    if name == "auto":
        name = "estimator" if estimator is not None else "embed"
    if name == "estimator":
        if estimator is None:
            raise ConfigError(
                "the cascade helper 'estimator' needs an estimator backend; set "
                "DUCKDB_SEM_ESTIMATOR_BACKEND (e.g. llama:), or DUCKDB_SEM_FILTER_HELPER=embed"
            )
        return ModelHelper(estimator)
    if name == "embed":
        embeddings = getattr(engine, "embeddings", None)
        if not isinstance(embeddings, Embeddings):
            raise ConfigError(
                "the cascade helper 'embed' needs an embedding model; open the connection with "
                "duckdb_sem.connect() (DUCKDB_SEM_EMBED_BACKEND chooses it)"
            )
        return EmbedHelper(embeddings)
    if named is None:
        raise ConfigError(
            f"cascade helper {name!r}: no backend was built for it; use auto, estimator, embed "
            "or a backend spec such as llama:/path/model.gguf"
        )
    return ModelHelper(named)


def as_numpy(scores: Sequence[float | None]) -> np.ndarray:
    """Scores as floats, NaN where there is none."""
    return np.array([np.nan if s is None else s for s in scores], dtype=np.float64)
