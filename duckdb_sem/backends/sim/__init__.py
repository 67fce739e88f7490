"""``sim:``: the SIMULATED GPU server, for deterministic tests and GPU-scale benchmarks.

Answers come from an oracle (:mod:`.oracles`), time from a vLLM-like step model
(:mod:`.cost_model`) under a named profile (:mod:`.profiles`); :mod:`.server` exposes the same
backend as an OpenAI-compatible HTTP server. See ``docs/backends.md``.
"""

from __future__ import annotations

from duckdb_sem.backends.sim.backend import OPTIONS, SimBackend, from_spec
from duckdb_sem.backends.sim.engine import EngineStats
from duckdb_sem.backends.sim.oracles import HashOracle, LookupOracle, NoLabel, Oracle
from duckdb_sem.backends.sim.profiles import PROFILES, SimProfile, get_profile

__all__ = [
    "OPTIONS",
    "PROFILES",
    "EngineStats",
    "HashOracle",
    "LookupOracle",
    "NoLabel",
    "Oracle",
    "SimBackend",
    "SimProfile",
    "from_spec",
    "get_profile",
]
