"""Injected transport faults for the SIMULATED backend (``fault=`` and ``fail_rate=``).

``sim:default?fault=500&fail_rate=0.2&seed=1`` makes a seeded-hash fraction ``fail_rate`` of
backend calls fail the way a remote server would, before any answer is produced:

==========  ================================================================================
fault       what the call does
==========  ================================================================================
timeout     raises :class:`BackendTimeoutError` at once (a client timeout, without the wait)
hang        blocks for ``hang_s`` seconds (default 30; woken early by ``abort``), then times out
reset       raises :class:`BackendUnavailableError` (connection reset by peer)
429, 500    raises :class:`BackendError` for that HTTP status (also 502, 503, 504)
truncate    raises :class:`BackendError` for a response body cut short
==========  ================================================================================

Whether try ``attempt`` of a call fails depends only on the seed, the attempt and the
requests, so runs repeat exactly; with ``fail_rate`` below 1 retries eventually pass, with 1
every try fails and the retry budget runs out. Every injected failure is a
:class:`~duckdb_sem.backends.retry.Transient`, retried by the shared transport policy.
Malformed *model output* is the separate ``malformed=`` option.

Example:
    >>> plan = FaultPlan("500", rate=1.0)
    >>> plan.strikes(("row",), attempt=0)
    True
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from duckdb_sem.backends.retry import Transient
from duckdb_sem.backends.sim.oracles import unit_hash
from duckdb_sem.errors import (
    BackendError,
    BackendTimeoutError,
    BackendUnavailableError,
    ConfigError,
)

__all__ = ["FAULTS", "FaultPlan"]

FAULTS = ("timeout", "hang", "reset", "429", "500", "502", "503", "504", "truncate")


@dataclass(frozen=True)
class FaultPlan:
    """Which calls fail and how; see the module docstring."""

    kind: str
    rate: float
    seed: int = 0
    hang_s: float = 30.0
    _wake: threading.Event = field(default_factory=threading.Event, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in FAULTS:
            raise ConfigError(f"sim fault={self.kind!r}: use one of {', '.join(FAULTS)}")
        if not 0.0 <= self.rate <= 1.0:
            raise ConfigError(f"sim fail_rate={self.rate} must be between 0 and 1")

    def strikes(self, rows: Sequence[str], *, attempt: int) -> bool:
        """Does try ``attempt`` of the call carrying ``rows`` fail?"""
        if self.rate <= 0.0:
            return False
        return unit_hash("fault", str(self.seed), str(attempt), *rows) < self.rate

    def inject(self, spec: str, rows: Sequence[str], *, attempt: int) -> None:
        """Raise this plan's fault (as a :class:`Transient`) when it strikes this try."""
        if not self.strikes(rows, attempt=attempt):
            return
        where = f"SIMULATED {spec}"
        if self.kind == "timeout":
            raise Transient(BackendTimeoutError(f"{where}: no answer in time (injected)"))
        if self.kind == "hang":
            self._wake.wait(self.hang_s)
            raise Transient(BackendTimeoutError(f"{where}: hung for {self.hang_s:g} s (injected)"))
        if self.kind == "reset":
            raise Transient(BackendUnavailableError(f"{where}: connection reset (injected)"))
        if self.kind == "truncate":
            raise Transient(BackendError(f"{where}: response body cut short (injected)"))
        raise Transient(BackendError(f"{where}: HTTP {self.kind} (injected)"))

    def wake(self) -> None:
        """End every hang now (``abort``/``close``); later calls hang again."""
        self._wake.set()
        self._wake.clear()
