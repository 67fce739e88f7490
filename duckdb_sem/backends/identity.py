"""A backend's identity, derived from one frozen object of every option that changes answers.

The identity is part of every request signature, so it is also the cache key's backend part:
two backends with equal identities must give equal answers. Each backend describes what can
change its answers in an :class:`Answers` subclass (model, decision threshold, log-probability
settings, context length, prompt-format version, few-shot set, ...) and
:attr:`~duckdb_sem.backends.base.Backend.backend_id` renders every field of it, so an option
cannot be left out of the identity by forgetting to write it into a format string. Options
that cannot change an answer (threads, timeouts, concurrency, retries) stay out of it, so
changing them keeps the cache.

Example:
    >>> @dataclass(frozen=True, slots=True, kw_only=True)
    ... class Demo(Answers):
    ...     threshold: float = 0.0
    >>> Demo(kind="demo", model="m").identity()
    'demo:m:threshold=0.0'
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from typing import ClassVar

__all__ = ["Answers", "digest"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Answers:
    """Base of each backend's answer-changing options; subclasses add fields."""

    kind: str  # the spec kind: llama, openai, vllm, sim, test
    model: str  # which model answers (file, served name, profile model)

    def identity(self) -> str:
        """``KIND:MODEL:field=value;...`` over every other field, in declaration order."""
        rest = ";".join(
            f"{f.name}={getattr(self, f.name)!s}"
            for f in fields(self)
            if f.name not in ("kind", "model")
        )
        return f"{self.kind}:{self.model}:{rest}" if rest else f"{self.kind}:{self.model}"

    #: fields that say where the model is served, not what it answers (an OpenAI-compatible
    #: server's address): replicas of one model differ only in them
    LOCATION: ClassVar[tuple[str, ...]] = ()

    def replica_identity(self) -> str:
        """The identity with the :attr:`LOCATION` fields left out: equal for replicas."""
        return replace(self, **dict.fromkeys(self.LOCATION, "")).identity()


def digest(items: Iterable[object]) -> str:
    """A short stable hash of a set of values (few-shot examples, prompt text) for identities."""
    payload = json.dumps(list(items), sort_keys=True, default=str)
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()[:12]
