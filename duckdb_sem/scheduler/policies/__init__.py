"""Scheduling policies, one module each behind :class:`Policy`, chosen by name.

=============  ==============================================================================
name           order
=============  ==============================================================================
``fcfs``       query arrival (run to completion at query granularity)
``srtf``       shortest estimated remaining cost first, with aging (SeqoFlow)
``mlfq``       multi-level feedback queue by attained service (no estimates needed)
``preemptdb``  two static classes; short queries preempt long ones at SEU boundaries
``joint``      SRTF + fusion contribution + aging, dynamic long/short split with a guaranteed
               share for long queries (HeraSys)
=============  ==============================================================================
"""

from __future__ import annotations

from duckdb_sem.errors import ConfigError
from duckdb_sem.scheduler.policies.base import KeyedPolicy, Policy, QueuedSEU
from duckdb_sem.scheduler.policies.fcfs import FCFS
from duckdb_sem.scheduler.policies.joint import Joint
from duckdb_sem.scheduler.policies.mlfq import MLFQ
from duckdb_sem.scheduler.policies.preemptdb import PreemptDB
from duckdb_sem.scheduler.policies.srtf import DEFAULT_AGING_RATE, SRTF

__all__ = [
    "DEFAULT_AGING_RATE",
    "FCFS",
    "MLFQ",
    "POLICIES",
    "SRTF",
    "Joint",
    "KeyedPolicy",
    "Policy",
    "PreemptDB",
    "QueuedSEU",
    "make_policy",
]

POLICIES = ("fcfs", "srtf", "mlfq", "preemptdb", "joint")


def make_policy(name: str, *, aging_rate: float | None = None, **options: float) -> Policy:
    """Build a policy by name; ``aging_rate`` applies to ``srtf`` and ``joint``.

    Other keyword options go to the policy's constructor (``quantum`` for mlfq, ``threshold``
    for preemptdb, ``long_share``/``long_quantile`` for joint).
    """
    rate = DEFAULT_AGING_RATE if aging_rate is None else aging_rate
    try:
        if name == "fcfs":
            return FCFS()
        if name == "srtf":
            return SRTF(aging_rate=rate)
        if name == "mlfq":
            return MLFQ(**options)  # type: ignore[arg-type]
        if name == "preemptdb":
            return PreemptDB(**options)
        if name == "joint":
            return Joint(aging_rate=rate, **options)  # type: ignore[arg-type]
    except (TypeError, ValueError) as err:
        raise ConfigError(f"bad options for scheduling policy {name!r}: {err}") from None
    raise ConfigError(f"unknown scheduling policy {name!r}; use one of {', '.join(POLICIES)}")
