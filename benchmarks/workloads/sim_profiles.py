"""The SIMULATED backend profiles the benchmarks use, by their role (all defined, with their
sources, in ``duckdb_sem/backends/sim/profiles.py`` and docs/backends.md).

- target: Qwen3-32B on 8x A100-80GB, TP=8 (the package's ``default`` profile, SeqoFlow's
  setup), two replicas in the multi-query experiments as in the paper;
- ``QWEN3_32B_H200``: Qwen3-32B BF16 on one H200-141GB (``--profile h200``);
- estimator: Qwen3-4B on one A100-80GB (the paper's small model).
"""

from __future__ import annotations

from duckdb_sem.backends.sim.profiles import SimProfile, get_profile

__all__ = ["ESTIMATOR_PROFILE", "PROFILES", "QWEN3_32B_H200", "TARGET_PROFILE", "profile"]

TARGET_PROFILE = get_profile("default")
QWEN3_32B_H200 = get_profile("qwen3-32b-h200")
ESTIMATOR_PROFILE = get_profile("qwen3-4b-a100")

PROFILES = {"a100x8": TARGET_PROFILE, "h200": QWEN3_32B_H200}


def profile(name: str) -> SimProfile:
    return PROFILES[name] if name in PROFILES else get_profile(name)
