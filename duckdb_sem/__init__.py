"""duckdb-sem: semantic SQL for DuckDB.

Two ways in:

- ``duckdb_sem.connect()``: a connection that binds ``{column}`` templates and plans semantic
  queries; used like a ``duckdb`` connection.
- ``duckdb_sem.install(con)``: the ``sem_*`` functions in any existing DuckDB connection, in the
  explicit form ``sem_filter('... {0} ...', col)``.

Both send every LLM call through one scheduler per process (or a sidecar: for the embedded
``llama:``, by default, the user's local one, so processes share one model), with a persistent
cache.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import duckdb

from duckdb_sem.backends.base import Backend
from duckdb_sem.config import Settings, parse_cache
from duckdb_sem.data import demo_path
from duckdb_sem.demo import load_demo
from duckdb_sem.errors import (
    AmbiguousColumnError,
    BackendError,
    BackendTimeoutError,
    BackendUnavailableError,
    BindError,
    ConfigError,
    ModelOutputError,
    OutputTypeError,
    PlanError,
    QueryCancelledError,
    SchedulerError,
    SemError,
    SidecarError,
    TemplateError,
    UnknownColumnError,
    UnknownModelError,
)
from duckdb_sem.runtime.context import QueryStats
from duckdb_sem.session import factory
from duckdb_sem.session.connection import SemConnection, SemRelation
from duckdb_sem.surface.udfs import SemSession

__all__ = [
    "AmbiguousColumnError",
    "BackendError",
    "BackendTimeoutError",
    "BackendUnavailableError",
    "BindError",
    "ConfigError",
    "ModelOutputError",
    "OutputTypeError",
    "PlanError",
    "QueryCancelledError",
    "QueryStats",
    "SchedulerError",
    "SemConnection",
    "SemError",
    "SemRelation",
    "SemSession",
    "Settings",
    "SidecarError",
    "TemplateError",
    "UnknownColumnError",
    "UnknownModelError",
    "connect",
    "default_connection",
    "demo_path",
    "install",
    "load_demo",
    "sql",
]

__version__ = "0.1.0"


def _settings(
    backend: str | Backend | None,
    cache: str | None,
    scheduler: str | None,
    batch_size: int | None,
    retry_failures: bool | None = None,
) -> Settings:
    """The environment's settings with the caller's explicit options on top."""
    settings = Settings.from_env().with_overrides(
        backend=backend if isinstance(backend, str) else None,
        scheduler_url=scheduler,
        batch_size=batch_size,
        retry_failures=retry_failures,
    )
    if cache is not None:  # "off" means no cache, so it cannot go through with_overrides
        settings = replace(settings, cache_path=parse_cache(cache))
    return settings


def install(
    con: duckdb.DuckDBPyConnection,
    *,
    backend: str | Backend | None = None,
    cache: str | None = None,
    scheduler: str | None = None,
    batch_size: int | None = None,
    max_llm_calls: int | None = None,
    max_prompt_tokens: int | None = None,
    max_cost: float | None = None,
    max_llm_calls_per_session: int | None = None,
    max_prompt_tokens_per_session: int | None = None,
    max_cost_per_session: float | None = None,
    models: Mapping[str, str | Backend] | None = None,
    embed_backend: str | Backend | None = None,
    retry_failures: bool | None = None,
) -> SemSession:
    """Register ``sem_filter``, ``sem_map``, ``sem_classify``, ``sem_join``, ``sem_agg``
    (explicit form) in ``con``.

    ``backend`` is a spec string (default ``DUCKDB_SEM_BACKEND`` or ``llama:``) or a Backend;
    ``cache`` a file path or ``'off'``; ``scheduler`` ``'local'`` (the per-user sidecar of the
    backend: the default for ``llama:``), ``'inprocess'`` or a sidecar URL; ``models`` named models
    (name -> spec string or Backend, over ``DUCKDB_SEM_MODELS``) that a call picks with
    ``model := 'name'``; ``embed_backend`` the embedding model's spec (default
    ``DUCKDB_SEM_EMBED_BACKEND`` or ``minilm:``, loaded on first use: ``sem_sim_join``,
    ``sem_search``, blocking). ``retry_failures=True`` (or ``DUCKDB_SEM_RETRY_FAILURES=1``) asks
    the backend again for answers the cache holds as failed (unparsable, so NULL) instead of
    reusing them. Returns the session, whose ``query.stats()`` holds the LLM usage since the
    last ``session.new_query()``. ``max_llm_calls`` / ``max_prompt_tokens`` / ``max_cost``
    bound the backend work of each query (from one ``session.new_query()`` to the next), and
    their ``_per_session`` twins the session's queries together, as in :func:`connect`.
    """
    settings = _settings(backend, cache, scheduler, batch_size, retry_failures).with_overrides(
        max_llm_calls=max_llm_calls, max_prompt_tokens=max_prompt_tokens, max_cost=max_cost,
        max_llm_calls_per_session=max_llm_calls_per_session,
        max_prompt_tokens_per_session=max_prompt_tokens_per_session,
        max_cost_per_session=max_cost_per_session,
        embed_backend=embed_backend if isinstance(embed_backend, str) else None,
    )  # fmt: skip
    return _install(con, settings, backend=backend, models=models, embed_backend=embed_backend,
                    peer_calls=True)  # fmt: skip


def _install(
    con: duckdb.DuckDBPyConnection,
    settings: Settings,
    *,
    backend: str | Backend | None,
    models: Mapping[str, str | Backend] | None,
    embed_backend: str | Backend | None,
    peer_calls: bool = False,
    owned: bool = False,
) -> SemSession:
    """The engine of ``settings`` (assembled once by the caller) installed in ``con``
    (``owned``: a ``SemConnection`` keeps the session, see ``factory.attach``)."""
    engine = factory.new_engine(
        settings,
        backend=backend if isinstance(backend, Backend) else None,
        models=models,
        embed_backend=embed_backend if isinstance(embed_backend, Backend) else None,
    )
    return factory.attach(con, engine, settings, peer_calls=peer_calls, owned=owned)


def connect(
    database: str = ":memory:",
    read_only: bool = False,  # positional, as in duckdb.connect()
    config: dict[str, Any] | None = None,
    *,
    backend: str | Backend | None = None,
    cache: str | None = None,
    scheduler: str | None = None,
    batch_size: int | None = None,
    optimize: bool = True,
    max_llm_calls: int | None = None,
    max_prompt_tokens: int | None = None,
    max_cost: float | None = None,
    max_llm_calls_per_session: int | None = None,
    max_prompt_tokens_per_session: int | None = None,
    max_cost_per_session: float | None = None,
    price_per_mtok_in: float | None = None,
    price_per_mtok_out: float | None = None,
    models: Mapping[str, str | Backend] | None = None,
    embed_backend: str | Backend | None = None,
    approximate: bool | None = None,
    join_recall: float | None = None,
    filter_precision: float | None = None,
    filter_recall: float | None = None,
    filter_helper: str | None = None,
    confidence: float | None = None,
    retry_failures: bool | None = None,
) -> SemConnection:
    """Open a DuckDB database with semantic SQL; see :func:`install` for the options.

    ``database``, ``read_only`` and ``config`` are ``duckdb.connect()``'s, positional as there.

    With ``optimize`` (the default) semantic SELECTs the optimizer can plan run on the chosen
    plan; others, and all with ``optimize=False``, run through the UDFs as written.
    ``max_llm_calls`` / ``max_prompt_tokens`` bound each query's backend work (it fails before
    passing them; see ``duckdb_sem.runtime.budget``), over ``DUCKDB_SEM_MAX_LLM_CALLS`` and ``DUCKDB_SEM_MAX_PROMPT_TOKENS``;
    ``max_cost`` (USD, over ``DUCKDB_SEM_MAX_COST``) its spend at the models' prices.
    ``max_llm_calls_per_session`` / ``max_prompt_tokens_per_session`` / ``max_cost_per_session``
    bound the sum over this connection's (and its cursors') queries.
    ``price_per_mtok_in`` / ``price_per_mtok_out`` (USD per million prompt / completion tokens,
    over ``DUCKDB_SEM_PRICE_IN`` / ``DUCKDB_SEM_PRICE_OUT``) add money to ``EXPLAIN SEMANTIC``
    and price models whose spec has no ``price_in`` / ``price_out`` (a model without: $0).
    ``models={"fast": "llama:", "big": "openai:http://host/v1?model=m"}`` names models for
    ``sem_filter('{text} ...', model := 'fast')``; ``CREATE MODEL`` adds more.
    ``approximate=True`` allows lossy plans (a ``sem_join`` blocked by embedding similarity,
    learned per query to reach ``join_recall``, default 0.95; see
    ``duckdb_sem.runtime.approximation``); ``SET duckdb_sem.approximate = on`` per session.
    It also lets a ``sem_filter`` run as a cascade: ``filter_helper`` (``auto``, ``estimator``,
    ``embed`` or a backend spec) decides the rows it is sure of, with thresholds learned to
    reach ``filter_precision`` and ``filter_recall`` (0.9 each) of the target's own answers
    (``duckdb_sem.runtime.cascade``). Both learn against confidence bounds: the targets hold
    with probability at least ``confidence`` (default 0.9; ``DUCKDB_SEM_CONFIDENCE``,
    ``SET duckdb_sem.confidence = 0.95``), as ``docs/optimizer.md`` states exactly.
    """
    con = duckdb.connect(database, read_only=read_only, config=config or {})
    settings = _settings(backend, cache, scheduler, batch_size, retry_failures).with_overrides(
        max_llm_calls=max_llm_calls,
        max_prompt_tokens=max_prompt_tokens,
        max_cost=max_cost,
        max_llm_calls_per_session=max_llm_calls_per_session,
        max_prompt_tokens_per_session=max_prompt_tokens_per_session,
        max_cost_per_session=max_cost_per_session,
        price_per_mtok_in=price_per_mtok_in,
        price_per_mtok_out=price_per_mtok_out,
        embed_backend=embed_backend if isinstance(embed_backend, str) else None,
        approximate=approximate,
        join_recall=join_recall,
        filter_precision=filter_precision,
        filter_recall=filter_recall,
        filter_helper=filter_helper,
        confidence=confidence,
    )
    session = _install(con, settings, backend=backend, models=models, embed_backend=embed_backend,
                       owned=True)  # fmt: skip
    return SemConnection(con, session, settings, optimize=optimize)


_default: SemConnection | None = None
_default_lock = threading.Lock()


def default_connection() -> SemConnection:
    """The process's shared in-memory connection, as ``duckdb.default_connection()`` (opened
    on first use with the environment's settings)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = connect()
        return _default


def sql(query: str, *, params: Sequence[Any] | None = None) -> SemRelation:
    """``duckdb.sql()`` with semantic SQL: runs on :func:`default_connection`."""
    return default_connection().sql(query, params=params)
