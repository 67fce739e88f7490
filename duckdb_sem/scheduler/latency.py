"""How long each SEU spent inside the sidecar: its own share of a query's latency.

The sidecar's handler records, per answered ``POST /v1/seu``, the seconds from reading the
request to writing the answer (queueing, dispatch, the backends' time and encoding; not the
network or the client). ``GET /v1/latency?since=T`` summarizes the SEUs answered after
``T``, a ``time.monotonic()`` reading: on Linux that clock is one for every process on the
machine, so a load benchmark can ask for exactly its own window
(``benchmarks/bench_sidecar_load.py``). With replicas that answer at once (a SIMULATED profile
at ``time_scale=0``) this is what the sidecar adds to a query's latency.

Example:
    >>> times = SeuTimes()
    >>> times.record(finished=10.0, seconds=0.002)
    >>> times.record(finished=11.0, seconds=0.004)
    >>> times.summary(since=10.5)
    {'count': 1, 'p50_ms': 4.0, 'p99_ms': 4.0}
"""

from __future__ import annotations

import threading
from collections import deque

__all__ = ["SeuTimes"]


class SeuTimes:
    """The last ``keep`` answered SEUs' (finish time, seconds in the sidecar)."""

    def __init__(self, keep: int = 1 << 16) -> None:
        self._lock = threading.Lock()
        self._times: deque[tuple[float, float]] = deque(maxlen=keep)

    def record(self, *, finished: float, seconds: float) -> None:
        with self._lock:
            self._times.append((finished, seconds))

    def summary(self, *, since: float = 0.0) -> dict[str, float]:
        """Count, P50 and P99 (milliseconds) of the SEUs answered after ``since``."""
        with self._lock:  # copy only: record() runs on every answered SEU
            picked = [s for end, s in self._times if end > since]
        picked.sort()
        if not picked:
            return {"count": 0, "p50_ms": 0.0, "p99_ms": 0.0}
        return {
            "count": len(picked),
            "p50_ms": round(1000 * picked[len(picked) // 2], 3),
            "p99_ms": round(1000 * picked[min(len(picked) - 1, int(0.99 * len(picked)))], 3),
        }
