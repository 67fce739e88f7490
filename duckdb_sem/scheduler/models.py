"""Named models of one connection: each a backend with its own scheduler and cache identity.

A connection always has the model ``default`` (its own backend). More are registered by name,
each from a backend spec string (``llama:``, ``openai:http://host/v1?model=m``, see
docs/backends.md) or a ``Backend`` object: ``connect(models={"fast": "llama:"})``,
``CREATE MODEL fast USING 'llama:'`` or ``DUCKDB_SEM_MODELS``. A call picks one with
``model := 'fast'``; its requests are signed with that model's backend identity, so they are
cached and fused apart from every other model's, and scheduled by the process's scheduler of
that backend (:func:`~duckdb_sem.scheduler.shared.scheduler_for`: connections naming the same
backend share it).

Named models are scheduled as a connection's own backend would be: an embedded one
(``llama:``) on its own local sidecar by default and with ``local``, others in process. With a
scheduler sidecar URL (``DUCKDB_SEM_SCHEDULER``) the sidecar serves its one backend, and
registering a model is a :class:`ConfigError` saying so.

Example:
    >>> models = Models(client, settings)  # doctest: +SKIP
    >>> models.register("fast", "test:?yes_if=good")  # doctest: +SKIP
    >>> models.client("fast").backend_id  # doctest: +SKIP
    'test:rules:yes_if=('good',);hash=None;selectivity=None'
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from duckdb_sem.backends.base import Backend
from duckdb_sem.backends.registry import SpecPrice, split_price, unknown_name_error
from duckdb_sem.config import Settings
from duckdb_sem.errors import ConfigError, UnknownModelError
from duckdb_sem.scheduler.seu import SchedulerClient
from duckdb_sem.scheduler.shared import is_sidecar_url, scheduler_for
from duckdb_sem.scheduler.sidecar_auth import split_token

__all__ = ["DEFAULT_MODEL", "ModelInfo", "Models", "check_model_name", "refuse_on_sidecar"]

DEFAULT_MODEL = "default"
_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")


def check_model_name(name: str) -> str:
    """The registry key of ``name`` (lower case); ConfigError for a name that is not one."""
    key = name.strip().lower()
    if not _NAME.match(key):
        raise ConfigError(
            f"model name {name!r} is not a name: use letters, digits and _ (e.g. fast, big_4o)"
        )
    if key == DEFAULT_MODEL:
        raise ConfigError(
            "'default' is the connection's own backend and cannot be registered; choose "
            "another name, or set the connection's backend= (DUCKDB_SEM_BACKEND)"
        )
    return key


def refuse_on_sidecar(settings: Settings, name: str) -> None:
    """ConfigError when ``settings`` schedule on a sidecar: it serves its one backend (a
    ``local`` one is per backend: each named model gets its own)."""
    if is_sidecar_url(settings.scheduler_url):
        raise ConfigError(
            f"model {name!r}: named models run in this process, but this connection "
            f"schedules on the sidecar {split_token(str(settings.scheduler_url))[0]}, which serves its one "
            "backend; unset DUCKDB_SEM_SCHEDULER (scheduler=) to use named models"
        )


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """One row of ``SHOW MODELS``."""

    name: str
    spec: str
    backend_id: str


class Models:
    """The connection's models by name; every client is a handle released by :meth:`close`."""

    def __init__(self, default: SchedulerClient, settings: Settings | None = None) -> None:
        self.default = default
        self.settings = settings or Settings()
        self._named: dict[str, tuple[str, SchedulerClient]] = {}
        self._prices: dict[str, SpecPrice] = {}  # from a spec's price_in / price_out
        self._lock = threading.Lock()

    @staticmethod
    def configured(
        default: SchedulerClient,
        settings: Settings,
        extra: Mapping[str, str | Backend] | None = None,
    ) -> Models:
        """The models of ``settings`` (``DUCKDB_SEM_MODELS``) and ``extra`` (the caller's,
        which win), all built now; on a failure the ones built are released again."""
        models = Models(default, settings)
        try:
            for name, spec in [*settings.models, *(extra or {}).items()]:
                models.register(name, spec, replace_existing=True)
        except BaseException:
            models.close()
            raise
        return models

    # -- lookup ----------------------------------------------------------------------------
    def client(self, name: str | None) -> SchedulerClient:
        """The scheduler client of model ``name`` (None or ``default``: the connection's)."""
        if name is None:
            return self.default
        key = name.strip().lower()
        if key == DEFAULT_MODEL:
            return self.default
        with self._lock:
            found = self._named.get(key)
        if found is None:
            raise UnknownModelError(self._unknown(name))
        return found[1]

    def check(self, name: str | None) -> None:
        """Raise :class:`UnknownModelError` unless ``name`` is a model of this connection."""
        self.client(name)

    def names(self) -> list[str]:
        with self._lock:
            return [DEFAULT_MODEL, *sorted(self._named)]

    def clients(self) -> list[SchedulerClient]:
        with self._lock:
            return [self.default, *(c for _, c in self._named.values())]

    def backend(self, name: str | None) -> Any:
        """The backend object behind model ``name`` (None through a sidecar)."""
        backends = getattr(self.client(name), "backends", None)
        return backends[0] if backends else None

    def price(self, name: str | None) -> SpecPrice | None:
        """The price model ``name``'s spec sets (``?price_in=&price_out=``), else None."""
        if name is None or name.strip().lower() == DEFAULT_MODEL:
            return split_price(self.settings.backend)[1] if self.settings.backend else None
        with self._lock:
            return self._prices.get(name.strip().lower())

    def info(self) -> list[ModelInfo]:
        """What ``SHOW MODELS`` lists: the default first, then by name."""
        default_spec = getattr(self.backend(None), "spec", None) or self.settings.backend
        rows = [ModelInfo(DEFAULT_MODEL, default_spec, self.default.backend_id)]
        with self._lock:
            named = sorted(self._named.items())
        rows += [ModelInfo(name, spec, client.backend_id) for name, (spec, client) in named]
        return rows

    # -- registration ------------------------------------------------------------------------
    def register(self, name: str, spec: str | Backend, *, replace_existing: bool = False) -> str:
        """Add model ``name`` (its backend is built now, so a bad spec fails here); its key."""
        key = check_model_name(name)
        refuse_on_sidecar(self.settings, name)
        with self._lock:
            if key in self._named and not replace_existing:
                raise ConfigError(
                    f"model {key!r} already exists; DROP MODEL {key} first, or write "
                    "CREATE OR REPLACE MODEL"
                )
        if isinstance(spec, Backend):
            client: SchedulerClient = scheduler_for(self.settings, spec)
            label = spec.spec if isinstance(getattr(spec, "spec", None), str) else repr(spec)
        else:
            if not isinstance(spec, str) or not spec.strip():
                raise ConfigError(f"model {name!r}: give a backend spec string, e.g. 'llama:'")
            client = scheduler_for(replace(self.settings, backend=spec.strip()))
            label = spec.strip()
        price = split_price(spec)[1] if isinstance(spec, str) else None
        with self._lock:
            old = self._named.get(key)
            self._named[key] = (label, client)
            self._prices.pop(key, None)
            if price is not None:
                self._prices[key] = price
        if old is not None:
            old[1].close()
        return key

    def drop(self, name: str, *, missing_ok: bool = False) -> None:
        key = name.strip().lower()
        with self._lock:
            found = self._named.pop(key, None)
            self._prices.pop(key, None)
        if found is None:
            if key == DEFAULT_MODEL:
                raise ConfigError("the default model is the connection's backend; it stays")
            if not missing_ok:
                raise UnknownModelError(self._unknown(name))
            return
        found[1].close()

    def share(self, default: SchedulerClient) -> Models:
        """The same named models for another connection (a cursor): a handle on each."""
        out = Models(default, self.settings)
        with self._lock:
            for key, (label, client) in self._named.items():
                share = getattr(client, "share", None)
                out._named[key] = (label, share() if share is not None else client)
            out._prices = dict(self._prices)
        return out

    def cancel(self, query_id: str) -> None:
        """Drop ``query_id``'s queued work on every model's scheduler."""
        for client in self.clients():
            client.cancel(query_id)

    def close(self) -> None:
        """Release the named models' schedulers (the default is released by its owner)."""
        with self._lock:
            named = list(self._named.values())
            self._named.clear()
        for _, client in named:
            client.close()

    def _unknown(self, name: str) -> str:
        return (
            unknown_name_error("model", name, self.names())
            + ". Register one with connect(models={...}) or CREATE MODEL name USING 'spec'"
        )
