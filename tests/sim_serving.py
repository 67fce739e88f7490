"""A SIMULATED server (``duckdb-sem sim-server``'s :class:`SimServer`) on a free port, in this
process, for the tests that reach it over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from duckdb_sem.backends.sim.backend import create
from duckdb_sem.backends.sim.server import SimServer


@contextmanager
def sim_serving(spec: str) -> Iterator[SimServer]:
    """Serve a backend built from ``spec``; the server, then the backend, closed after."""
    backend = create(spec)
    server = SimServer(backend).start()
    try:
        yield server
    finally:
        server.close()
        backend.close()
