"""Where the SIMULATED backend's answers come from.

An oracle maps a request to an answer: a ``bool`` for decisions, a value of the requested SQL
type for generation. Benchmarks supply labels with :class:`LookupOracle` (row text, or any key
derived from the request, to label); everything else gets a seeded hash with a configured
selectivity (:class:`HashOracle`), so runs are reproducible and independent of wall time.

Example:
    >>> oracle = LookupOracle({"great film": "fresh"}, positive={"fresh"})
    >>> oracle.labels
    {'great film': 'fresh'}
"""

from __future__ import annotations

import csv
import datetime
import hashlib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from duckdb_sem.backends.tokens import estimate_tokens
from duckdb_sem.errors import ConfigError
from duckdb_sem.llm.outputs import TypeSpec, parse_type
from duckdb_sem.llm.request import LLMRequest, Task
from duckdb_sem.llm.scalars import dump_json

__all__ = ["HashOracle", "LookupOracle", "NoLabel", "Oracle", "estimate_tokens", "unit_hash"]

_WORDS = tuple(
    [
        "data",
        "query",
        "model",
        "answer",
        "review",
        "movie",
        "plot",
        "value",
        "record",
        "table",
        "filter",
        "join",
        "result",
        "token",
        "system",
        "batch",
        "cost",
        "plan",
        "user",
        "text",
        "label",
        "score",
        "river",
        "stone",
        "light",
        "green",
        "quick",
        "report",
    ]
)


class NoLabel(LookupError):
    """The oracle has no answer for this request (the backend returns NULL with a warning)."""


class Oracle(Protocol):
    """Answers one request; ``identity`` changes whenever the answers would."""

    @property
    def identity(self) -> str: ...

    def answer(self, request: LLMRequest) -> Any: ...


def unit_hash(*parts: str) -> float:
    """A deterministic number in [0, 1) from strings (independent of PYTHONHASHSEED)."""
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


class HashOracle:
    """Seeded hash answers: yes with probability ``selectivity``, typed values from the hash.

    The hash covers the prefix as well as the row, so two different filters over the same row
    are independent, while the same request always gets the same answer.
    """

    def __init__(self, selectivity: float = 0.5, seed: int = 0, *, output_words: int = 8) -> None:
        if not 0.0 <= selectivity <= 1.0:
            raise ConfigError(f"sim selectivity {selectivity} must be between 0 and 1")
        if output_words < 1:
            raise ConfigError(f"sim output_words {output_words} must be at least 1")
        self.selectivity = selectivity
        self.seed = seed
        self.output_words = output_words

    @property
    def identity(self) -> str:
        return f"hash:{self.selectivity}:{self.seed}:{self.output_words}"

    def answer(self, request: LLMRequest) -> Any:
        if request.output.task is Task.DECIDE:
            return self._decide(request.prefix, request.row)
        return self._value(parse_type(request.output.sql_type), request.prefix, request.row)

    def _decide(self, *parts: str) -> bool:
        return unit_hash(str(self.seed), "decide", *parts) < self.selectivity

    def _value(self, spec: TypeSpec, *parts: str) -> Any:
        u = unit_hash(str(self.seed), spec.sql, *parts)
        if spec.kind == "list":
            ((_, child),) = spec.children
            return [self._value(child, *parts, str(i)) for i in range(1 + int(u * 3))]
        if spec.kind == "struct":
            return {name: self._value(child, *parts, name) for name, child in spec.children}
        if spec.labels:
            return spec.labels[int(u * len(spec.labels))]
        if spec.sql == "BOOLEAN":
            return self._decide(*parts)
        if spec.sql == "DATE":
            return datetime.date(1990, 1, 1) + datetime.timedelta(days=int(u * 12_000))
        if spec.sql == "JSON":
            return dump_json({"score": int(u * 100)})
        if spec.sql in ("INTEGER", "BIGINT"):
            return int(u * 1000)
        if spec.sql == "DOUBLE":
            return round(u * 100, 3)
        # VARCHAR: between half and one and a half times output_words words
        count = max(1, round(self.output_words * (0.5 + u)))
        return " ".join(
            _WORDS[int(unit_hash(str(self.seed), str(i), *parts) * len(_WORDS))]
            for i in range(count)
        )


def row_key(request: LLMRequest) -> str:
    return request.row


class LookupOracle:
    """Answers from supplied labels: ``labels[key(request)]``.

    For decisions a label counts as yes when it is in ``positive`` (when given) or else when
    it is truthy (``True``, ``1``, ``"yes"``, ``"true"``). For generation the label is coerced
    to the requested type. Keys without a label go to ``fallback`` or raise :class:`NoLabel`.
    """

    def __init__(
        self,
        labels: Mapping[str, Any],
        *,
        key: Callable[[LLMRequest], str] = row_key,
        positive: Iterable[Any] | None = None,
        fallback: Oracle | None = None,
    ) -> None:
        self.labels = dict(labels)
        self.key = key
        self.positive = frozenset(positive) if positive is not None else None
        self.fallback = fallback
        content = repr(sorted((k, repr(v)) for k, v in self.labels.items()))
        self._digest = hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()[:16]

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[str, Any]], **kwargs: Any) -> LookupOracle:
        return cls(dict(pairs), **kwargs)

    @classmethod
    def from_csv(cls, path: str | Path, **kwargs: Any) -> LookupOracle:
        """Labels from a CSV file with ``key`` and ``label`` columns (a header row)."""
        try:
            with open(path, newline="", encoding="utf-8") as handle:
                rows = list(csv.DictReader(handle))
        except OSError as err:
            raise ConfigError(f"cannot read sim labels file {path}: {err}") from None
        if rows and not {"key", "label"} <= set(rows[0]):
            raise ConfigError(f"sim labels file {path} needs a header with 'key' and 'label'")
        return cls({row["key"]: row["label"] for row in rows}, **kwargs)

    @property
    def identity(self) -> str:
        positive = sorted(map(repr, self.positive)) if self.positive is not None else None
        fallback = self.fallback.identity if self.fallback is not None else None
        return f"lookup:{len(self.labels)}:{self._digest}:{positive}:{fallback}"

    def answer(self, request: LLMRequest) -> Any:
        try:
            label = self.labels[self.key(request)]
        except KeyError:
            if self.fallback is None:
                raise NoLabel(f"no label for key {self.key(request)[:60]!r}") from None
            return self.fallback.answer(request)
        if request.output.task is Task.DECIDE:
            if self.positive is not None:
                return label in self.positive
            if isinstance(label, str):
                return label.strip().lower() in {"true", "yes", "y", "1", "t"}
            return bool(label)
        return parse_type(request.output.sql_type).coerce(label)
