"""``test:``: a deterministic, zero-latency rule backend for unit tests and overhead benchmarks.

It is not a model. Decisions: with ``yes_if=WORD[|WORD...]``, yes when the row contains one of
the words (case-insensitive); with ``hash=P``, yes when a hash of the row's *column values* (the
rendered template with its literal words removed, so the template's own words never decide)
falls under ``P``; otherwise yes when a hash of the whole row falls under ``selectivity``
(default 0.5). ``hash`` is the oracle of differential tests: the answer depends on the data
alone, so a filter applied to the wrong rows changes the result. Generation: VARCHAR answers ``"<first words of the row>"``; numbers are the
row's length; BOOLEAN follows the decision rule; a DATE is 2000-01-01 plus the row's length in
days; JSON is ``{"words": [<first three words>], "length": <row length>}``; an ENUM (a STRUCT
field) is the first of its labels the row names, else one a hash of the row picks; lists and
structs are built from the row's words. A choice among text labels (``sem_classify``) is the first label a column value
contains (case-insensitive), else the one a hash of the column values picks. ``latency_ms``
adds a sleep per batch. Token counts are whitespace words.

Example: ``test:?yes_if=great|good&latency_ms=5`` or ``test:?hash=0.5``
"""

from __future__ import annotations

import datetime
import hashlib
import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from duckdb_sem.backends.base import Answers, Backend, Capacity
from duckdb_sem.backends.registry import BackendSpec, SpecOption
from duckdb_sem.backends.throughput import Throughput
from duckdb_sem.llm.outputs import TypeSpec, parse_type
from duckdb_sem.llm.request import Completion, LLMRequest, Task
from duckdb_sem.llm.scalars import dump_json

__all__ = ["OPTIONS", "RuleAnswers", "RuleBackend", "from_spec"]

OPTIONS = (
    SpecOption("yes_if", "yes when the row contains one of these |-separated words", True),
    SpecOption("hash", "yes when a hash of the column values falls under this share", True),
    SpecOption("selectivity", "share of rows a whole-row hash says yes to (default 0.5)", True),
    SpecOption("latency_ms", "sleep per batch, in milliseconds (default 0)"),
    SpecOption("max_batch", "requests per batch (default 256)"),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class RuleAnswers(Answers):
    yes_if: tuple[str, ...] = ()
    hash: float | None = None
    selectivity: float = 0.5


def column_values(request: LLMRequest) -> tuple[str, ...]:
    """The values rendered into the request's template (the whole row without a template)."""
    template = request.template
    row = request.row
    if template is None or not row.startswith(template.pieces[0]):
        return (row,)
    rest, values = row[len(template.pieces[0]) :], []
    for i, piece in enumerate(template.pieces[1:]):
        last = i == len(template.pieces) - 2
        cut = (len(rest) - len(piece) if rest.endswith(piece) else -1) if last else rest.find(piece)
        if cut < 0 or (not piece and not last):
            return (row,)  # adjacent fields cannot be told apart: hash the row
        values.append(rest[:cut])
        rest = rest[cut + len(piece) :]
    return tuple(values)


def choose_label(request: LLMRequest) -> str:
    """The first label a column value names, else one picked by a hash of the values."""
    labels = request.output.labels
    values = column_values(request)
    lowered = " ".join(values).lower()
    for label in labels:
        if label.lower() in lowered:
            return label
    return labels[int(_unit("\x1f".join(values)) * len(labels))]


def _unit(text: str) -> float:
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


class RuleBackend(Backend):
    def __init__(
        self,
        *,
        spec: str = "test:",
        yes_if: Sequence[str] = (),
        hash_share: float | None = None,
        selectivity: float = 0.5,
        latency_ms: float = 0.0,
        max_batch: int = 256,
    ) -> None:
        self.spec = spec
        self.yes_if = tuple(w.lower() for w in yes_if if w)
        self.hash_share = hash_share
        self.selectivity = selectivity
        self.answers = RuleAnswers(
            kind="test", model="rules", yes_if=self.yes_if, hash=hash_share, selectivity=selectivity
        )
        self.latency_ms = latency_ms
        self.max_batch = max_batch
        self.calls = 0  # requests answered, for tests
        self._lock = threading.Lock()

    def capacity(self) -> Capacity:
        return Capacity(max_batch=self.max_batch, max_concurrent_batches=4)

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def throughput(self) -> Throughput:
        """Tokens cost nothing; each batch of ``max_batch`` requests sleeps ``latency_ms``."""
        return Throughput(
            math.inf,
            math.inf,
            self.latency_ms / 1000 / self.max_batch,
            source=f"test: backend, latency_ms={self.latency_ms:g} per batch of {self.max_batch}",
        )

    def decide(self, row: str, request: LLMRequest | None = None) -> bool:
        if self.yes_if:
            lowered = row.lower()
            return any(word in lowered for word in self.yes_if)
        if self.hash_share is not None and request is not None:
            return _unit("\x1f".join(column_values(request))) < self.hash_share
        return _unit(row) < self.selectivity

    def complete(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        if self.latency_ms:
            time.sleep(self.latency_ms / 1000)
        with self._lock:
            self.calls += len(requests)
        return [self._answer(r) for r in requests]

    def _answer(self, request: LLMRequest) -> Completion:
        prompt_tokens = self.count_tokens(request.prefix) + self.count_tokens(request.row)
        if request.output.task is Task.DECIDE:
            yes = self.decide(request.row, request)
            return Completion(yes, "yes" if yes else "no", prompt_tokens, 1, 1.0 if yes else -1.0)
        spec = parse_type(request.output.sql_type)
        if request.output.task is Task.CLASSIFY and (spec.is_text or spec.labels):
            label = choose_label(request)
            return Completion(label, label, prompt_tokens, 1)
        value = self._generate(spec, request.row, request)
        text = str(value)
        return Completion(value, text, prompt_tokens, self.count_tokens(text) or 1)

    def _generate(self, spec: TypeSpec, row: str, request: LLMRequest | None = None) -> Any:
        words = row.split()
        if spec.kind == "list":
            ((_, child),) = spec.children
            return [self._generate(child, w) for w in words[:3]]
        if spec.kind == "struct":
            return {name: self._generate(child, row, request) for name, child in spec.children}
        if spec.labels:  # the first label the row names, else one its hash picks
            named = [label for label in spec.labels if label.lower() in row.lower()]
            return named[0] if named else spec.labels[int(_unit(row) * len(spec.labels))]
        if spec.sql == "VARCHAR":
            return " ".join(words[:5])
        if spec.sql == "DATE":  # a day after 2000-01-01 as many days as the row is long
            return datetime.date(2000, 1, 1) + datetime.timedelta(days=len(row))
        if spec.sql == "JSON":
            return dump_json({"words": words[:3], "length": len(row)})
        if spec.sql == "BOOLEAN":
            return self.decide(row, request)
        if spec.sql == "DOUBLE":
            return float(len(row)) / 10
        return len(row)


def from_spec(spec: BackendSpec) -> RuleBackend:
    words = (spec.option("yes_if") or "").split("|")
    return RuleBackend(
        spec=spec.raw,
        yes_if=[w for w in words if w],
        hash_share=spec.float_option("hash", 0.5) if spec.option("hash") is not None else None,
        selectivity=spec.float_option("selectivity", 0.5),
        latency_ms=spec.float_option("latency_ms", 0.0),
        max_batch=spec.int_option("max_batch", 256),
    )
