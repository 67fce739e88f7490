"""One scheduler per process and backend, shared by every connection (or the sidecar's client).

Connections that use the same backend, cache file and policy share one :class:`Scheduler`, so
identical work of concurrent queries on different connections is fused and ordered together.
With a sidecar URL the client talks to the sidecar process instead, which does the same across
processes.

They live as long as the process (a model or an engine is not reloaded for every connection);
at exit :func:`close_all` stops them and closes the backends they built (HTTP connections,
engine threads), so nothing is left for the interpreter to tear down half-way.
"""

from __future__ import annotations

import atexit
import importlib
import logging
import threading
from collections.abc import Callable
from pathlib import Path

from duckdb_sem.backends.base import Backend
from duckdb_sem.backends.registry import create_backend
from duckdb_sem.cache.store import LLMCache
from duckdb_sem.config import Settings
from duckdb_sem.scheduler.core import Scheduler
from duckdb_sem.scheduler.seu import SchedulerClient

__all__ = ["close_all", "open_cache", "scheduler_for"]

log = logging.getLogger(__name__)

_lock = threading.RLock()
_schedulers: dict[tuple[str, str, str, float | None], Scheduler] = {}
_sidecars: dict[str, SchedulerClient] = {}
_caches: dict[Path, LLMCache] = {}


def open_cache(path: Path | None) -> LLMCache | None:
    if path is None:
        return None
    resolved = path.expanduser().resolve()
    with _lock:
        cache = _caches.get(resolved)
        if cache is None:
            cache = _caches[resolved] = LLMCache(resolved)
        return cache


def scheduler_for(settings: Settings, backend: Backend | None = None) -> SchedulerClient:
    """The scheduler client for these settings (a sidecar client when a URL is set)."""
    if settings.scheduler_url:
        url = settings.scheduler_url
        with _lock:
            client = _sidecars.get(url)
            if client is None:
                # Imported lazily: in-process users never load httpx.
                module = importlib.import_module("duckdb_sem.scheduler.sidecar_client")
                client = _sidecars[url] = module.SidecarClient(url)
        return client
    if backend is not None:
        # A caller-built backend object gets its own scheduler (not shared by spec).
        return Scheduler(
            [backend],
            policy=settings.policy,
            cache=open_cache(settings.cache_path),
            aging_rate=settings.aging_rate,
        )
    key = (settings.backend, str(settings.cache_path), settings.policy, settings.aging_rate)
    with _lock:
        scheduler = _schedulers.get(key)
    if scheduler is None:
        built = create_backend(settings.backend)  # may load a model: outside the lock
        with _lock:
            scheduler = _schedulers.get(key)
            if scheduler is None:
                scheduler = _schedulers[key] = Scheduler(
                    [built],
                    policy=settings.policy,
                    cache=open_cache(settings.cache_path),
                    aging_rate=settings.aging_rate,
                )
    return scheduler


def close_all() -> None:
    """Close every shared scheduler, the backends they built, and the sidecar clients (at exit;
    a later :func:`scheduler_for` builds new ones)."""
    with _lock:
        schedulers = list(_schedulers.values())
        sidecars = list(_sidecars.values())
        _schedulers.clear()
        _sidecars.clear()
    for client in [*schedulers, *sidecars]:
        _close(client.close, type(client).__name__)
    for scheduler in schedulers:
        for backend in scheduler.backends:
            _close(backend.close, backend.describe())


def _close(close: Callable[[], None], what: str) -> None:
    try:
        close()
    except Exception as err:  # noqa: BLE001 - at exit: report it, close the others
        log.warning("closing %s failed: %s", what, err)


atexit.register(close_all)
