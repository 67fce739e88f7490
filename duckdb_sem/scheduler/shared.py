"""One scheduler per backend identity per process, shared by every connection.

Connections whose backends have the same identity (``Backend.backend_id``: the model and every
option that changes answers) share one :class:`Scheduler` whatever their cache file or policy
setting, so the scheduler that orders work for a model sees all of that model's work, and
identical work of concurrent queries is fused. What a connection still chooses: its cache file
(each :class:`SharedScheduler` handle looks up and fills its own cache), its batch size and
runtime. The policy and aging rate are the scheduler's: the first connection's settings decide,
and a later connection asking for others gets a logged warning (docs/scheduler.md).

A spec is built into a backend once to learn its identity; later connections with the same spec
reuse the scheduler without building anything. A ``Backend`` object passed to ``connect()`` is
its caller's: it gets a scheduler of its own (shared by connections given the same object),
which is closed with its last connection; the backend object itself is left open.

Each connection holds one handle; the scheduler, and the backend built for it, are closed when
the last handle closes, and at exit (:func:`close_all`). A handle the garbage collector takes
without a ``close()`` (a connection a notebook forgot) releases its share then, on a thread of
its own, so a forgotten connection does not keep its backend, and its options, for the
process. With a sidecar URL the handle wraps the sidecar client of that URL instead, counted
the same way; with ``local``, the client of the per-user sidecar of the spec and cache
(:mod:`.local`). A ``Backend`` object cannot travel to another process, so with ``local`` it
is scheduled in process.

With no scheduler chosen (``DUCKDB_SEM_SCHEDULER`` unset), an embedded backend (``llama:``,
:data:`EMBEDDED_KINDS`) is scheduled on its local sidecar, so the processes of a user hold one
copy of the model, not one each; every other backend in process. Where that sidecar cannot
start (no unix sockets, a socket path too long, a start that fails), the connection schedules
in process instead, with one logged warning per process saying why; ``local`` asked for
explicitly fails instead, and ``inprocess`` never tries.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import importlib.util
import logging
import socket
import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from duckdb_sem.backends.base import Backend
from duckdb_sem.backends.registry import create_backend, parse_spec, split_price
from duckdb_sem.cache.store import LLMCache
from duckdb_sem.config import INPROCESS_SCHEDULER, LOCAL_SCHEDULER, Settings
from duckdb_sem.errors import ConfigError, SidecarError
from duckdb_sem.scheduler.core import Scheduler
from duckdb_sem.scheduler.seu import SEU, SchedulerClient, SEUResult

__all__ = [
    "EMBEDDED_KINDS",
    "SharedScheduler",
    "close_all",
    "is_sidecar_url",
    "open_cache",
    "scheduler_for",
    "shares_by_default",
]

log = logging.getLogger(__name__)

#: backend kinds whose model lives in the process: unless told otherwise, their processes share
#: one per-user local sidecar instead of each loading the model
EMBEDDED_KINDS = frozenset({"llama"})

_lock = threading.RLock()


@dataclass(eq=False)
class _Entry:
    key: object
    client: SchedulerClient
    owned: list[Backend] = field(default_factory=list)  # built here: closed with the client
    users: int = 0
    choice: tuple[str, float | None] = ("", None)  # the policy and aging rate it was built with
    spec: str = ""  # the backend spec it was built from (in process)
    told: set[str] = field(default_factory=set)  # other specs (less price) warned about


_entries: dict[object, _Entry] = {}
_spec_ids: dict[str, str] = {}  # spec string -> the identity its backend had
_caches: dict[tuple[Path, bool], LLMCache] = {}
_local_failed: set[object] = set()  # default-local keys whose sidecar failed: in process now


def open_cache(path: Path | None, *, retry_failures: bool = False) -> LLMCache | None:
    """The process's cache object for ``path`` (one per file and ``retry_failures`` choice:
    both share the file, one reuses cached failures, the other asks again)."""
    if path is None:
        return None
    key = (path.expanduser().resolve(), retry_failures)
    with _lock:
        cache = _caches.get(key)
        if cache is None:
            cache = _caches[key] = LLMCache(key[0], retry_failures=retry_failures)
        return cache


class SharedScheduler:
    """One connection's handle on a shared scheduler (or sidecar client): submits with the
    connection's cache, and releases its share on :meth:`close`. Other attributes (``status``,
    ``usage``, ``backends``, ...) are the scheduler's."""

    def __init__(self, entry: _Entry, cache: LLMCache | None) -> None:
        self._entry = entry
        self.scheduler = entry.client
        self.cache = cache
        self.backend_id = entry.client.backend_id
        # released once: by close(), or when the garbage collector takes an unclosed handle
        self._finalizer = weakref.finalize(self, _collected, entry)
        self._finalizer.atexit = False  # at exit, close_all() closes what is still open

    def submit(self, seu: SEU) -> Future[SEUResult]:
        if isinstance(self.scheduler, Scheduler):
            return self.scheduler.submit_with(seu, self.cache)
        return self.scheduler.submit(seu)

    def cancel(self, query_id: str) -> None:
        self.scheduler.cancel(query_id)

    def share(self) -> SharedScheduler:
        """Another handle on the same scheduler and cache (a cursor's), released on its own."""
        with _lock:
            self._entry.users += 1
        return SharedScheduler(self._entry, self.cache)

    def close(self) -> None:
        """Release this connection's share; the last one closes the scheduler (idempotent)."""
        if self._finalizer.detach() is not None:  # None: released already
            _release(self._entry)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.scheduler, name)


def is_sidecar_url(value: str | None) -> bool:
    """Whether a ``scheduler=`` value names a sidecar of the user's own (a URL)."""
    return bool(value) and value not in (LOCAL_SCHEDULER, INPROCESS_SCHEDULER)


def shares_by_default(spec: str) -> bool:
    """Whether a connection with no scheduler chosen schedules ``spec`` on its local sidecar:
    an embedded model, on a platform with unix sockets and ``flock``."""
    try:
        kind = parse_spec(spec).kind
    except ConfigError:
        return False  # building it in process says what is wrong
    unix = hasattr(socket, "AF_UNIX") and importlib.util.find_spec("fcntl") is not None
    return kind in EMBEDDED_KINDS and unix


def scheduler_for(settings: Settings, backend: Backend | None = None) -> SharedScheduler:
    """A handle on the scheduler for these settings (a sidecar client when a URL is set, or the
    local sidecar's client for ``local`` and, by default, an embedded backend)."""
    chosen = settings.scheduler_url
    if is_sidecar_url(chosen):
        entry = _entry_for(("sidecar", chosen), lambda: _sidecar(settings))
        return _handle(entry, None, settings)
    key = ("local", settings.backend, settings.cache_path, settings.retry_failures)
    if chosen == LOCAL_SCHEDULER and backend is None:
        return _handle(_entry_for(key, lambda: _local(settings)), None, settings)
    failure: Exception | None = None
    if not chosen and backend is None and key not in _local_failed:
        try:
            if shares_by_default(settings.backend):
                return _handle(_entry_for(key, lambda: _local(settings)), None, settings)
        except (SidecarError, ConfigError, OSError) as err:
            _local_failed.add(key)  # this process does not try again
            failure = err
    handle = _in_process(settings, backend)
    if failure is not None:  # after the build: a bad spec is its own error, not this warning
        log.warning(
            "%s: the local scheduler that shares one model among this user's processes could "
            "not start (%s); this process schedules in process, with a model of its own. Fix "
            "the cause to share it, or set DUCKDB_SEM_SCHEDULER=inprocess (scheduler="
            "'inprocess') to schedule in process without trying",
            settings.backend,
            failure,
        )
    return handle


def _in_process(settings: Settings, backend: Backend | None) -> SharedScheduler:
    cache = open_cache(settings.cache_path, retry_failures=settings.retry_failures)
    if backend is not None:
        entry = _entry_for(("object", id(backend)), lambda: (_scheduler(backend, settings), []))
        return _handle(entry, cache, settings)
    with _lock:
        known = _spec_ids.get(settings.backend)
        entry_or_none = _entries.get(known) if known is not None else None
        if entry_or_none is not None:
            _warn_other_spec(entry_or_none, settings.backend)
            return _handle(entry_or_none, cache, settings)
    built = create_backend(settings.backend)  # may load a model: outside the lock
    with _lock:
        _spec_ids[settings.backend] = built.backend_id
        existing = _entries.get(built.backend_id)
        if existing is None:
            entry = _entries[built.backend_id] = _Entry(
                built.backend_id, _scheduler(built, settings), [built], spec=settings.backend
            )
            entry.choice = (settings.policy, settings.aging_rate)
            return _handle(entry, cache, settings)
    # another spec with the same identity (say other threads) already has a scheduler
    _close(built.close, built.describe())
    _warn_other_spec(existing, settings.backend)
    return _handle(existing, cache, settings)


def _warn_other_spec(entry: _Entry, spec: str) -> None:
    """Say, once per spec, that a connection of ``spec`` runs on the backend another spec of
    the same model built: the options in which the two differ (threads, latency, batch size,
    concurrency, rate limits: none of them changes answers) are the other spec's. A price
    (``price_in`` / ``price_out``) is each connection's own, so specs that differ only in
    price share silently."""
    ours_spec = split_price(spec)[0]
    theirs_spec = split_price(entry.spec)[0] if entry.spec else ""
    with _lock:
        if not entry.spec or ours_spec == theirs_spec or ours_spec in entry.told:
            return
        entry.told.add(ours_spec)  # once per spec but its price: the same options differ
    try:
        mine, theirs = parse_spec(ours_spec), parse_spec(theirs_spec)
    except ConfigError:  # both were built: cannot happen; say it plainly anyway
        differ = [spec]
    else:
        ours, other = dict(mine.options), dict(theirs.options)
        differ = [f"{k}={ours.get(k, '(default)')} (runs with {other.get(k, '(default)')})"
                  for k in sorted(set(ours) | set(other)) if ours.get(k) != other.get(k)]  # fmt: skip
        if mine.target != theirs.target:
            differ.insert(0, f"target {mine.target!r} (runs with {theirs.target!r})")
    log.warning(
        "backend %r: this process already schedules the same model with the same answers "
        "(%s) on the backend built from %r, and every connection of that model shares it; "
        "this connection's %s do not apply until every connection of %r is closed",
        spec,
        entry.key,
        entry.spec,
        ", ".join(differ),
        entry.spec,
    )


def _scheduler(backend: Backend, settings: Settings) -> Scheduler:
    return Scheduler([backend], policy=settings.policy, aging_rate=settings.aging_rate)


def _sidecar(settings: Settings) -> tuple[SchedulerClient, list[Backend]]:
    # Imported lazily: in-process users never load httpx.
    module = importlib.import_module("duckdb_sem.scheduler.sidecar_client")
    client: SchedulerClient = module.SidecarClient(settings.scheduler_url)
    return client, []


def _local(settings: Settings) -> tuple[SchedulerClient, list[Backend]]:
    module = importlib.import_module("duckdb_sem.scheduler.local")
    client: SchedulerClient = module.LocalScheduler(settings)
    return client, []


def _entry_for(key: object, build: Callable[[], tuple[SchedulerClient, list[Backend]]]) -> _Entry:
    with _lock:
        entry = _entries.get(key)
        if entry is None:
            client, owned = build()
            entry = _entries[key] = _Entry(key, client, owned)
        return entry


def _handle(entry: _Entry, cache: LLMCache | None, settings: Settings) -> SharedScheduler:
    with _lock:
        if entry.users == 0 and entry.choice == ("", None):
            entry.choice = (settings.policy, settings.aging_rate)
        entry.users += 1
        in_process = isinstance(entry.client, Scheduler)
        if in_process and entry.choice != (settings.policy, settings.aging_rate):
            log.warning(
                "%s: the scheduler shared by this backend's connections runs policy %s (aging "
                "%s); this connection asked for %s (aging %s), which applies only to a new "
                "scheduler once every connection of this backend is closed",
                entry.client.backend_id,
                *entry.choice,
                settings.policy,
                settings.aging_rate,
            )
        return SharedScheduler(entry, cache)


def _forget(entry: _Entry) -> None:
    """Drop ``entry`` from the registry (under the lock)."""
    _entries.pop(entry.key, None)
    for spec in [s for s, key in _spec_ids.items() if key == entry.key]:
        del _spec_ids[spec]


def _release(entry: _Entry) -> None:
    """One handle's share given back; the last one forgets and closes the scheduler."""
    with _lock:
        entry.users -= 1
        last = entry.users <= 0 and _entries.get(entry.key) is entry
        if last:
            _forget(entry)
    if last:
        _shut(entry)


def _collected(entry: _Entry) -> None:
    """A handle was garbage-collected unclosed: release its share on another thread (the
    collector may run inside any code, this module's locked sections included)."""
    log.debug("%s: a connection was collected without close(); releasing its share",
              entry.client.backend_id)  # fmt: skip
    with contextlib.suppress(RuntimeError):  # at interpreter shutdown: close_all() has run
        threading.Thread(
            target=_release, args=(entry,), name="duckdb-sem-release", daemon=True
        ).start()


def _shut(entry: _Entry) -> None:
    _close(entry.client.close, type(entry.client).__name__)
    for backend in entry.owned:
        _close(backend.close, backend.describe())


def close_all() -> None:
    """Close every shared scheduler, the backends they built, and the sidecar clients (at exit;
    a later :func:`scheduler_for` builds new ones)."""
    with _lock:
        entries = list(_entries.values())
        _entries.clear()
        _spec_ids.clear()
        _local_failed.clear()
    for entry in entries:
        _shut(entry)


def _close(close: Callable[[], None], what: str) -> None:
    try:
        close()
    except Exception as err:  # noqa: BLE001 - at exit: report it, close the others
        log.warning("closing %s failed: %s", what, err)


atexit.register(close_all)
