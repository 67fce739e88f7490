"""Scheduling policies, one module each, chosen by name with :func:`make_policy`."""

from __future__ import annotations

from duckdb_sem.errors import ConfigError
from duckdb_sem.scheduler.policies.base import Policy, QueuedSEU
from duckdb_sem.scheduler.policies.fcfs import FCFS
from duckdb_sem.scheduler.policies.srtf import SRTF

__all__ = ["POLICIES", "Policy", "QueuedSEU", "make_policy"]

POLICIES = ("fcfs", "srtf")


def make_policy(name: str, *, aging_rate: float = 1.0) -> Policy:
    if name == "fcfs":
        return FCFS()
    if name == "srtf":
        return SRTF(aging_rate=aging_rate)
    raise ConfigError(f"unknown scheduling policy {name!r}; use one of {', '.join(POLICIES)}")
