"""The one place an engine is wired: scheduler client, named models, embeddings, UDFs.

Every entry gets its engine from here, so they cannot drift apart:

- :func:`new_engine` for ``duckdb_sem.connect()``, ``duckdb_sem.install(con)`` and the wire
  server's database (settings assembled once by the caller, from the environment and its
  explicit options);
- :func:`shared_engine` for a connection's ``cursor()`` (its own handle of the same scheduler,
  models and embedding model);
- :func:`dry_engine` for the dry run behind ``EXPLAIN SEMANTIC`` of a statement off the
  optimizer (every model a counting ``DryBackend``).

:func:`attach` then installs the engine's ``sem_*`` functions in a DuckDB connection.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import duckdb

from duckdb_sem.backends.base import Backend
from duckdb_sem.config import INPROCESS_SCHEDULER, Settings
from duckdb_sem.runtime.budget import Budget
from duckdb_sem.runtime.dry_run import DryBackend
from duckdb_sem.runtime.embeddings import Embeddings
from duckdb_sem.runtime.operators import SemEngine
from duckdb_sem.scheduler.models import DEFAULT_MODEL, Models, refuse_on_sidecar
from duckdb_sem.scheduler.shared import scheduler_for
from duckdb_sem.surface.udfs import SemSession

__all__ = ["attach", "dry_engine", "dry_settings", "new_engine", "shared_engine"]


def new_engine(
    settings: Settings,
    *,
    backend: Backend | None = None,
    models: Mapping[str, str | Backend] | None = None,
    embed_backend: Backend | None = None,
) -> SemEngine:
    """An engine for ``settings``: the default model's scheduler (``backend`` when given, else
    ``settings.backend``), the named models (``DUCKDB_SEM_MODELS`` and ``models``) and the
    embedding model (built on first use)."""
    for name, _ in [*settings.models, *(models or {}).items()]:
        refuse_on_sidecar(settings, name)  # before the sidecar is even asked
    client = scheduler_for(settings, backend)
    try:
        named = Models.configured(client, settings, models)
    except BaseException:
        client.close()
        raise
    embeddings = Embeddings(settings, backend=embed_backend)
    return SemEngine(client, batch_size=settings.batch_size, models=named,
                     embeddings=embeddings)  # fmt: skip


def shared_engine(engine: SemEngine, settings: Settings) -> SemEngine:
    """Another handle of ``engine``: same scheduler, models and embedding model, released on
    its own (a cursor's engine)."""
    client = engine.client
    share: Any = getattr(client, "share", None)  # a handle of its own, released by close()
    own = share() if share is not None else client
    embeddings = engine.embeddings.another() if engine.embeddings is not None else None
    return SemEngine(own, batch_size=engine.batch_size, models=engine.models.share(own),
                     embeddings=embeddings or Embeddings(settings))  # fmt: skip


def dry_settings(settings: Settings) -> Settings:
    """``settings`` for a dry run: no cache, no sidecar, no budget."""
    return dataclasses.replace(settings, cache_path=None,
                               scheduler_url=INPROCESS_SCHEDULER,
                               max_llm_calls=None, max_prompt_tokens=None, max_cost=None,
                               max_llm_calls_per_session=None, max_cost_per_session=None,
                               max_prompt_tokens_per_session=None)  # fmt: skip


def dry_engine(engine: SemEngine, settings: Settings) -> tuple[SemEngine, dict[str, DryBackend]]:
    """An engine whose every model (the default and each named one of ``engine``) is a
    counting :class:`DryBackend`, with no cache and no budget: what a dry run asks."""
    settings = dry_settings(settings)
    counters = {name: DryBackend(name) for name in engine.models.names()}
    client = scheduler_for(settings, counters[DEFAULT_MODEL])
    models = Models(client, settings)
    for name, counter in counters.items():
        if name != DEFAULT_MODEL:
            models.register(name, counter)
    embeddings = engine.embeddings.another() if engine.embeddings is not None else None
    dry = SemEngine(client, batch_size=engine.batch_size, models=models,
                    embeddings=embeddings or Embeddings(settings))  # fmt: skip
    return dry, counters


def attach(
    con: duckdb.DuckDBPyConnection,
    engine: SemEngine,
    settings: Settings | None = None,
    *,
    peer_calls: bool = False,
    owned: bool = False,
) -> SemSession:
    """Install ``engine``'s ``sem_*`` functions in ``con``; the session that owns them (each
    query bounded by ``settings``' budgets, its queries together by the session ones).
    ``peer_calls``: the peers' calls with their own arguments as macros too
    (:mod:`~duckdb_sem.surface.peer_macros`; a plain connection's only way to them, where
    ``connect()`` rewrites them instead). ``owned``: the caller keeps the session (a
    ``SemConnection``), so the UDFs reach it weakly (:attr:`SemSession.owned`)."""
    budget = None
    if settings is not None:
        budget = Budget.from_settings(settings)
    session = SemSession(con, engine, budget=budget, owned=owned)
    session.install(peer_calls=peer_calls)
    return session
