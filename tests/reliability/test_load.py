"""64 concurrent connections over 4 processes, with injected faults: results equal a serial run.

Runs ``benchmarks/bench_reliability_load.py`` with smaller parameters (40 s after warm-up instead of 180 s);
the benchmark itself writes ``benchmarks/results/reliability_load.md``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.integration]

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_reliability_load.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_reliability_load", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_64_connections_under_faults_match_a_serial_run_with_bounded_memory() -> None:
    report = _bench().run_load(processes=4, connections=16, seconds=40.0, fault_rate=0.05)
    assert not report.errors, "\n".join(report.errors)  # the whole message, if it ever fails
    assert report.queries >= 64 and report.distinct >= 16
    assert report.mismatches == []  # every result equals the serial, fault-free one
    assert report.cold() == []  # every connection ran each kind of query: RSS after that
    for name in report.rss:
        warm, end, peak = report.growth(name)
        assert end <= warm * 1.3 + 40, f"{name}: RSS grew from {warm:.0f} to {end:.0f} MB"
        assert peak < 1024, f"{name}: peak RSS {peak:.0f} MB"
