"""``test:``: a deterministic, zero-latency rule backend for unit tests and overhead benchmarks.

It is not a model. Decisions: with ``yes_if=WORD[|WORD...]``, yes when the row contains one of
the words (case-insensitive); otherwise yes when a hash of the row falls under ``selectivity``
(default 0.5). Generation: VARCHAR answers ``"<first words of the row>"``; numbers are the
row's length; BOOLEAN follows the decision rule; lists and structs are built from the row's
words. ``latency_ms`` adds a sleep per batch. Token counts are whitespace words.

Example: ``test:?yes_if=great|good&latency_ms=5``
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Sequence
from typing import Any

from duckdb_sem.backends.base import Backend, Capacity
from duckdb_sem.backends.registry import BackendSpec
from duckdb_sem.llm.outputs import TypeSpec, parse_type
from duckdb_sem.llm.request import Completion, LLMRequest, Task

__all__ = ["RuleBackend", "from_spec"]


class RuleBackend(Backend):
    def __init__(
        self,
        *,
        spec: str = "test:",
        yes_if: Sequence[str] = (),
        selectivity: float = 0.5,
        latency_ms: float = 0.0,
        max_batch: int = 256,
    ) -> None:
        self.spec = spec
        self.yes_if = tuple(w.lower() for w in yes_if if w)
        self.selectivity = selectivity
        self.latency_ms = latency_ms
        self.max_batch = max_batch
        self.calls = 0  # requests answered, for tests
        self._lock = threading.Lock()

    @property
    def backend_id(self) -> str:
        return f"test:{'|'.join(self.yes_if)}:{self.selectivity}"

    def capacity(self) -> Capacity:
        return Capacity(max_batch=self.max_batch, max_concurrent_batches=4)

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def decide(self, row: str) -> bool:
        if self.yes_if:
            lowered = row.lower()
            return any(word in lowered for word in self.yes_if)
        digest = hashlib.sha256(row.encode("utf-8", "surrogatepass")).digest()
        return int.from_bytes(digest[:8], "big") / 2**64 < self.selectivity

    def complete(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        if self.latency_ms:
            time.sleep(self.latency_ms / 1000)
        with self._lock:
            self.calls += len(requests)
        return [self._answer(r) for r in requests]

    def _answer(self, request: LLMRequest) -> Completion:
        prompt_tokens = self.count_tokens(request.prefix) + self.count_tokens(request.row)
        if request.output.task is Task.DECIDE:
            yes = self.decide(request.row)
            return Completion(yes, "yes" if yes else "no", prompt_tokens, 1, 1.0 if yes else -1.0)
        spec = parse_type(request.output.sql_type)
        value = self._generate(spec, request.row)
        text = str(value)
        return Completion(value, text, prompt_tokens, self.count_tokens(text) or 1)

    def _generate(self, spec: TypeSpec, row: str) -> Any:
        words = row.split()
        if spec.kind == "list":
            ((_, child),) = spec.children
            return [self._generate(child, w) for w in words[:3]]
        if spec.kind == "struct":
            return {name: self._generate(child, row) for name, child in spec.children}
        if spec.sql == "VARCHAR":
            return " ".join(words[:5])
        if spec.sql == "BOOLEAN":
            return self.decide(row)
        if spec.sql == "DOUBLE":
            return float(len(row)) / 10
        return len(row)


def from_spec(spec: BackendSpec) -> RuleBackend:
    words = (spec.option("yes_if") or "").split("|")
    return RuleBackend(
        spec=spec.raw,
        yes_if=[w for w in words if w],
        selectivity=spec.float_option("selectivity", 0.5),
        latency_ms=spec.float_option("latency_ms", 0.0),
        max_batch=spec.int_option("max_batch", 256),
    )
