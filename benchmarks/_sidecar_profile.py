"""Where the sidecar's CPU goes: ``bench_sidecar_load.py --profile``.

Runs a sidecar in this process (the same :class:`SidecarServer` and :class:`Scheduler` that
``duckdb-sem serve`` builds) and profiles its event loop's thread and executor threads with
``cProfile`` on each thread's own CPU clock (``time.thread_time``: time blocked on a socket or
a lock is not counted), while the benchmark's client processes drive it. The SIMULATED
engines' own stepping threads are not profiled (a few percent in a per-thread reading).
Profiling slows every Python call, so the shares, not the absolute times, are the result.
"""

from __future__ import annotations

import cProfile
import pstats
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["COMPONENTS", "profiled_sidecar", "shares"]

#: (label, function names whose cumulative CPU makes it up); the parts overlap nothing
COMPONENTS = (
    ("HTTP parsing and writes, /v1/status, the rest of the event loop's thread", ()),
    ("decode the SEU (JSON -> LLMRequest)", ("decode_seu",)),
    ("Scheduler.submit: signatures, fusion, queue, dispatch", ("submit_with",)),
    ("encode the answer (-> JSON)", ("encode_result",)),
    ("SIMULATED backend.complete (oracle, cost model)", ("complete@backends/sim/backend.py",)),
    ("Scheduler.complete: fill waiters, accounting", ("complete@scheduler/core.py",)),
    ("executor threads, the rest", ()),
)


class _Profiles:
    def __init__(self) -> None:
        self.local = threading.local()
        self.all: dict[str, list[cProfile.Profile]] = {"connection": [], "executor": []}

    def wrap(self, kind: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any) -> Any:
            p = getattr(self.local, "p", None)
            if p is None:
                p = self.local.p = cProfile.Profile(time.thread_time)
                self.all[kind].append(p)
            depth = getattr(self.local, "depth", 0)
            if not depth:  # a wrapped call inside another is profiled by the outer one
                p.enable()
            self.local.depth = depth + 1
            try:
                return fn(*args)
            finally:
                self.local.depth = depth
                if not depth:
                    p.disable()

        return run


def profiled_sidecar(spec: str, replicas: int) -> tuple[Any, _Profiles]:
    """A started in-process sidecar on a free port, its connection and executor threads
    profiled; returns (server, profiles)."""
    from duckdb_sem.backends.registry import create_backend
    from duckdb_sem.scheduler import executor, sidecar_server
    from duckdb_sem.scheduler.core import Scheduler

    profiles = _Profiles()
    # the event loop's thread: parsing, decoding and submitting (data_received), encoding and
    # writing answers (_seu_done); libuv's own C work outside these calls is not profiled
    conn, front = sidecar_server._Connection, sidecar_server._Front
    conn.data_received = profiles.wrap("connection", conn.data_received)  # type: ignore[method-assign]
    front._seu_done = profiles.wrap("connection", front._seu_done)  # type: ignore[method-assign]
    run = executor.ThreadExecutor._run
    executor.ThreadExecutor._run = staticmethod(profiles.wrap("executor", run))  # type: ignore[method-assign]
    scheduler = Scheduler([create_backend(spec) for _ in range(replicas)])
    return sidecar_server.SidecarServer(scheduler, "127.0.0.1:0").start(), profiles


def _cumulative(stats: pstats.Stats, name: str) -> float:
    func, _, where = name.partition("@")
    total = 0.0
    for (file, _line, fname), row in stats.stats.items():  # type: ignore[attr-defined]
        if fname == func and (not where or file.endswith(where)):
            total += row[3]
    return total


def shares(profiles: _Profiles) -> list[tuple[str, float]]:
    """(component, share of the profiled CPU) in :data:`COMPONENTS` order."""
    totals: dict[str, float] = {}
    parts: dict[str, float] = {}
    for kind, group in profiles.all.items():
        if not group:
            totals[kind] = 0.0
            continue
        stats = pstats.Stats(group[0])
        for p in group[1:]:
            stats.add(p)
        totals[kind] = stats.total_tt  # type: ignore[attr-defined]
        for _label, names in COMPONENTS:
            for name in names:
                parts[name] = parts.get(name, 0.0) + _cumulative(stats, name)
    everything = sum(totals.values()) or 1.0
    conn_named = sum(parts[n] for n in ("decode_seu", "submit_with", "encode_result"))
    exec_named = sum(
        parts[n] for n in ("complete@backends/sim/backend.py", "complete@scheduler/core.py")
    )
    out = []
    for label, names in COMPONENTS:
        if label.startswith("HTTP"):
            value = totals["connection"] - conn_named
        elif label.startswith("executor"):
            value = totals["executor"] - exec_named
        else:
            value = sum(parts[n] for n in names)
        out.append((label, max(0.0, value) / everything))
    return out
