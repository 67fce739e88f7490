"""Placement: which backend replica a dispatch goes to, chosen by name.

===================  ==========================================================================
name                 replica
===================  ==========================================================================
``least-loaded``     fewest requests (then tokens) in flight; rows of one instruction spread
                     over every replica, and each replica warms its own prefix cache
``prefix-affinity``  rendezvous hashing of the dispatch's shared prefix (its instruction), with
                     a load bound: a prefix keeps going to its replica, whose prefix cache holds
                     it, until that replica carries more than ``load_factor`` times the mean
                     load (this dispatch counted); then the next replica in its ranking does
===================  ==========================================================================

``prefix-affinity`` is bounded-load consistent hashing (Mirrokni, Thorup, Zadimoghaddam, 2018):
the bound keeps one hot instruction from piling onto one replica while the others idle, and
rendezvous (highest-random-weight) ranking moves only the prefixes of a replica that is added
or removed. It is what vLLM's router (``vllm-router --policy cache_aware``) and llm-d do in
front of the servers; placing in the scheduler needs no extra process and sees the prefix
directly, not a guess from the prompt text.

Example:
    >>> make_placement("prefix-affinity").name
    'prefix-affinity'
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from duckdb_sem.errors import ConfigError
from duckdb_sem.scheduler.admission import ReplicaState, least_loaded

__all__ = ["PLACEMENTS", "LeastLoaded", "Placement", "PrefixAffinity", "make_placement"]

PLACEMENTS = ("least-loaded", "prefix-affinity")


class Placement(Protocol):
    """Chooses a replica for one dispatch. Called under the scheduler's lock."""

    @property
    def name(self) -> str: ...

    def place(
        self, replicas: Sequence[ReplicaState], *, prefix: str, requests: int, tokens: int
    ) -> ReplicaState | None:
        """The replica to take ``requests`` requests of shared ``prefix`` (None: none free)."""
        ...


@dataclass(frozen=True, slots=True)
class LeastLoaded:
    """Today's default: the least loaded replica that can take a dispatch."""

    name: str = "least-loaded"

    def place(
        self, replicas: Sequence[ReplicaState], *, prefix: str, requests: int, tokens: int
    ) -> ReplicaState | None:
        return least_loaded(replicas)


@dataclass(frozen=True, slots=True)
class PrefixAffinity:
    """Bounded-load rendezvous hashing of the prefix; see the module docstring."""

    load_factor: float = 1.25
    name: str = "prefix-affinity"

    def __post_init__(self) -> None:
        if self.load_factor < 1.0:
            raise ConfigError(
                f"prefix-affinity load_factor={self.load_factor} must be >= 1 "
                "(1 balances strictly, larger values keep prefixes on their replica longer)"
            )

    def place(
        self, replicas: Sequence[ReplicaState], *, prefix: str, requests: int, tokens: int
    ) -> ReplicaState | None:
        fallback = least_loaded(replicas)
        if fallback is None or len(replicas) == 1:
            return fallback
        # A replica is eligible while its load is within load_factor x the mean load, this
        # dispatch counted, so an idle deployment always takes a prefix at its first choice.
        bound = self.load_factor * (sum(r.requests for r in replicas) + requests) / len(replicas)
        for replica in sorted(replicas, key=lambda r: _weight(prefix, r.index), reverse=True):
            free = replica.dispatches < replica.limits.max_dispatches or replica.dispatches == 0
            if free and replica.requests <= bound and replica.admits(requests, tokens):
                return replica
        return fallback


def _weight(prefix: str, index: int) -> int:
    """Rendezvous weight of (prefix, replica): a stable hash, the same in every process."""
    digest = hashlib.blake2b(f"{index}\x00{prefix}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def make_placement(name: str, *, load_factor: float | None = None) -> Placement:
    """Build a placement by name (``load_factor`` applies to ``prefix-affinity``)."""
    if name == "least-loaded":
        return LeastLoaded()
    if name == "prefix-affinity":
        return PrefixAffinity() if load_factor is None else PrefixAffinity(load_factor)
    raise ConfigError(f"unknown placement {name!r}; use one of {', '.join(PLACEMENTS)}")
