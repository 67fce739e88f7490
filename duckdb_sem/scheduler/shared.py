"""One scheduler per process and backend, shared by every connection (or the sidecar's client).

Connections that use the same backend, cache file and policy share one :class:`Scheduler`, so
identical work of concurrent queries on different connections is fused and ordered together.
With a sidecar URL the client talks to the sidecar process instead, which does the same across
processes.
"""

from __future__ import annotations

import importlib
import threading
from pathlib import Path

from duckdb_sem.backends.base import Backend
from duckdb_sem.backends.registry import create_backend
from duckdb_sem.cache.store import LLMCache
from duckdb_sem.config import Settings
from duckdb_sem.scheduler.core import Scheduler
from duckdb_sem.scheduler.seu import SchedulerClient

__all__ = ["open_cache", "scheduler_for"]

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
