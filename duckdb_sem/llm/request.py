"""The LLM request contract shared by the surface, the scheduler and every backend.

A request is a *shared prefix* (the operator's instruction, identical for every row of an
operator, so backends can reuse its KV cache) plus a *row part* (the rendered template), an
output specification and decoding parameters. Its signature hashes all of these together with
the backend's identity: equal signatures mean equal answers, which is what the cache and
cross-query fusion rely on.
"""

from __future__ import annotations

import enum
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Completion",
    "DecodingParams",
    "LLMRequest",
    "OperatorKind",
    "OutputSpec",
    "Task",
]


class Task(enum.Enum):
    """What the backend is asked to do."""

    DECIDE = "decide"  # a yes/no decision, scored from the answer tokens' log-probabilities
    GENERATE = "generate"  # free generation, parsed into ``OutputSpec.sql_type``


class OperatorKind(enum.Enum):
    FILTER = "filter"
    MAP = "map"
    JOIN = "join"
    AGG = "agg"


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """The shape of an answer: a task and the DuckDB type the answer is parsed into."""

    task: Task
    sql_type: str = "VARCHAR"

    @staticmethod
    def decision() -> OutputSpec:
        return OutputSpec(Task.DECIDE, "BOOLEAN")


@dataclass(frozen=True, slots=True)
class DecodingParams:
    max_tokens: int = 64
    temperature: float = 0.0
    seed: int = 0


@dataclass(frozen=True, slots=True)
class LLMRequest:
    """One unit of LLM work: one row through one semantic operator."""

    operator: OperatorKind
    prefix: str
    row: str
    output: OutputSpec
    params: DecodingParams = field(default_factory=DecodingParams)

    def signature(self, backend_id: str) -> str:
        """A stable hash of everything that determines the answer on ``backend_id``."""
        payload = json.dumps(
            [
                backend_id,
                self.operator.value,
                self.prefix,
                self.row,
                self.output.task.value,
                self.output.sql_type,
                self.params.max_tokens,
                self.params.temperature,
                self.params.seed,
            ],
            ensure_ascii=False,
            separators=(",", ":"),
        )
        return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class Completion:
    """A backend's answer to one request.

    ``value`` is the parsed Python value (``bool`` for decisions, or the value of the requested
    SQL type), ``None`` when the output could not be parsed after all retries; then ``error``
    says why. ``text`` is the raw model output, kept for debugging and the cache.
    """

    value: Any
    text: str
    prompt_tokens: int
    completion_tokens: int
    score: float | None = None
    error: str | None = None

    def to_json(self) -> str:
        return json.dumps(
            {
                "value": self.value,
                "text": self.text,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "score": self.score,
                "error": self.error,
            },
            ensure_ascii=False,
        )

    @staticmethod
    def from_json(data: str) -> Completion:
        raw = json.loads(data)
        return Completion(
            value=raw["value"],
            text=raw["text"],
            prompt_tokens=int(raw["prompt_tokens"]),
            completion_tokens=int(raw["completion_tokens"]),
            score=raw.get("score"),
            error=raw.get("error"),
        )
