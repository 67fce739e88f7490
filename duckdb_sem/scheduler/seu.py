"""Subquery Execution Units and the scheduler-client contract.

An SEU is one batch of a query's LLM work: the requests of one operator over one input batch.
Queries submit SEUs one at a time, so the scheduler can run another query's SEU between two of
them (preemption at SEU boundaries) without losing finished work.
"""

from __future__ import annotations

import enum
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Protocol

from duckdb_sem.llm.request import Completion, LLMRequest

__all__ = ["SEU", "SEUResult", "SchedulerClient", "Served"]


@dataclass(frozen=True, slots=True)
class SEU:
    query_id: str
    operator: str  # a label for progress and metrics, e.g. "sem_filter#1"
    requests: tuple[LLMRequest, ...]
    remaining_cost: float = 0.0  # the query's estimated remaining LLM cost (tokens) incl. this SEU
    connection: str = ""


class Served(enum.Enum):
    """How one request of an SEU was answered."""

    BACKEND = "backend"  # executed by the backend for this SEU (physical work)
    CACHE = "cache"  # from the persistent cache
    FUSED = "fused"  # shared with an identical request already queued or running


@dataclass(frozen=True, slots=True)
class SEUResult:
    completions: tuple[Completion, ...]
    served: tuple[Served, ...]


class SchedulerClient(Protocol):
    """What the runtime needs from a scheduler, in process or in the sidecar."""

    backend_id: str

    def submit(self, seu: SEU) -> Future[SEUResult]: ...

    def cancel(self, query_id: str) -> None: ...

    def close(self) -> None: ...
