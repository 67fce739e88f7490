"""The one DuckDB database behind a wire server, and a ``SemConnection`` per client session.

The instance is opened on the user's file itself (read-only when asked), so there is no
``memory`` catalog for sessions to share: its catalogs are the user's database, the
PostgreSQL sources (read-only, see :mod:`duckdb_sem.pg`), ``system`` and each connection's
``temp``. DuckDB registers Python UDFs database-wide (in ``system``), so the server installs
the ``sem_*`` UDFs once and creates the ``sem_*`` macros and catalog compat macros as TEMP
macros in each session's cursor: a session that redefines one changes only itself. Which query
a UDF batch belongs to is found per thread (:class:`RoutedSession`): the server runs DuckDB
with ``threads=1`` by default, so a query's UDF calls happen on its session's thread, which
makes per-query statistics and cancellation exact.

Before any client connects, external access is switched off (no files, no ``ATTACH``, no
extensions from SQL, no temp directory to spill into) unless the operator allowed it, and
DuckDB's configuration is locked so no client can switch it back. What SQL may run is decided
per statement in :mod:`.policy`.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import duckdb

from duckdb_sem.config import Settings, parse_cache
from duckdb_sem.errors import ConfigError, SemError
from duckdb_sem.pgwire.catalog import COMPAT_MACROS, install_compat
from duckdb_sem.pgwire.commit_clock import CommitClock
from duckdb_sem.pgwire.policy import Policy
from duckdb_sem.runtime.context import QueryContext
from duckdb_sem.runtime.operators import SemEngine
from duckdb_sem.session import factory
from duckdb_sem.session.connection import SemConnection
from duckdb_sem.surface.aliases import ALIASES
from duckdb_sem.surface.udfs import SemSession

__all__ = ["Database", "DatabaseOptions", "RoutedSession"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DatabaseOptions:
    path: str = ":memory:"
    read_only: bool = False
    backend: str | None = None
    scheduler: str | None = None
    cache: str | None = None
    threads: int = 1
    #: directories SQL may read and write (everything else stays closed)
    allowed_directories: tuple[str, ...] = ()
    #: let SQL reach files, ATTACH and extensions everywhere (off by default)
    external_access: bool = False
    #: PostgreSQL databases attached as sources: (alias, libpq DSN)
    postgres: tuple[tuple[str, str], ...] = ()


class RoutedSession(SemSession):
    """A ``SemSession`` whose current query, last error and cursor are kept per thread."""

    def __init__(self, con: duckdb.DuckDBPyConnection, engine: SemEngine) -> None:
        self._local = threading.local()
        super().__init__(con, engine)

    @property
    def query(self) -> QueryContext:
        current: QueryContext | None = getattr(self._local, "query", None)
        if current is None:
            current = self._local.query = QueryContext()
        return current

    @query.setter
    def query(self, value: QueryContext) -> None:
        self._local.query = value
        listener: Callable[[QueryContext], None] | None = getattr(self._local, "listener", None)
        if listener is not None:
            listener(value)

    @property
    def last_error(self) -> SemError | None:
        error: SemError | None = getattr(self._local, "last_error", None)
        return error

    @last_error.setter
    def last_error(self, value: SemError | None) -> None:
        self._local.last_error = value

    def listen(self, listener: Callable[[QueryContext], None]) -> None:
        """Call ``listener`` with each new query started on the calling thread."""
        self._local.listener = listener

    def bind_cursor(self, cursor: duckdb.DuckDBPyConnection) -> None:
        """Give ``cursor`` (the calling thread's session) its own TEMP ``sem_*`` macros."""
        self.install_macros(cursor)
        self._local.cursor = cursor
        self._local.defined = set(self.macros)

    def _macro_connection(self) -> duckdb.DuckDBPyConnection:
        cursor: duckdb.DuckDBPyConnection | None = getattr(self._local, "cursor", None)
        return self.con if cursor is None else cursor

    def _define(self, name: str, sql: str) -> None:
        super()._define(name, sql)
        defined: set[str] | None = getattr(self._local, "defined", None)
        if defined is not None:
            defined.add(name)

    def _ensure_defined(self, name: str) -> None:
        defined: set[str] | None = getattr(self._local, "defined", None)
        if defined is not None and name not in defined and name in self.macros:
            self._macro_connection().execute(self.macros[name])
            defined.add(name)


def _open(options: DatabaseOptions) -> duckdb.DuckDBPyConnection:
    config: dict[str, str | bool | int | float | list[str]] = {"threads": str(options.threads)}
    path = options.path
    if path != ":memory:" and not options.read_only and not Path(path).parent.exists():
        raise ConfigError(f"directory of database {path!r} does not exist: create it first")
    if options.read_only and path != ":memory:" and not Path(path).exists():
        raise ConfigError(f"database {path!r} does not exist (--read-only opens a file as is)")
    try:
        return duckdb.connect(
            path, read_only=options.read_only and path != ":memory:", config=config
        )
    except duckdb.IOException as err:
        text = str(err)
        if "lock" in text.lower():
            held = re.search(r"held in (.+?) \(PID (\d+)\)", text)
            holder = f"PID {held.group(2)}, {held.group(1)}" if held else "see lsof"
            raise ConfigError(
                f"database {path!r} is locked by another process ({holder}): stop it, "
                "or serve a copy of the file"
            ) from None
        raise ConfigError(f"cannot open database {path!r}: {text.splitlines()[0]}") from None


class Database:
    """Owns the DuckDB instance; ``session()`` opens a connection for one client."""

    def __init__(self, options: DatabaseOptions) -> None:
        self.options = options
        overrides: dict[str, Any] = {"backend": options.backend, "scheduler_url": options.scheduler}
        settings = Settings.from_env().with_overrides(**overrides)
        if options.cache is not None:
            settings = replace(settings, cache_path=parse_cache(options.cache))
        self.settings = settings
        self._base = _open(options)
        self.engine = factory.new_engine(settings)  # DUCKDB_SEM_MODELS: every session's
        #: every session's commits, so a savepoint replays only at an unchanged snapshot
        self.commits = CommitClock()
        self.routed = RoutedSession(self._base, self.engine)
        self.routed.install(shared=True)
        (name,) = self._base.execute("SELECT current_database()").fetchone() or ("memory",)
        self.name = str(name)
        self.sources: list[Any] = []
        for alias, dsn in options.postgres:
            from duckdb_sem.pg import attach_postgres

            self.sources.append(attach_postgres(self._base, dsn, alias=alias))
        self.policy = Policy(
            read_only=options.read_only,
            external_access=options.external_access,
            catalogs=frozenset({self.name, *(s.alias for s in self.sources)}),
            reserved=frozenset(COMPAT_MACROS) | frozenset(ALIASES),
        )
        self._lock_down()

    def _lock_down(self) -> None:
        con = self._base
        if not self.options.external_access:
            if self.options.allowed_directories:
                listed = ", ".join(
                    "'" + str(Path(d).resolve()).replace("'", "''") + "/'"
                    for d in self.options.allowed_directories
                )
                con.execute(f"SET allowed_directories = [{listed}]")
            # each source's catalog file, attached again when PostgreSQL's tables change
            catalogs = [p for s in self.sources if s.catalog for p in s.catalog.paths]
            if catalogs:
                listed = ", ".join("'" + p.replace("'", "''") + "'" for p in catalogs)
                con.execute(f"SET allowed_paths = [{listed}]")
            # DuckDB lets SQL reach its temp directory even then (COPY TO, ATTACH there).
            con.execute("SET temp_directory = ''")
            con.execute("SET enable_external_access = false")
            con.execute("SET allow_community_extensions = false")
            con.execute("SET autoinstall_known_extensions = false")
            con.execute("SET autoload_known_extensions = false")
        # each session's TimeZone is its own cursor's (pgwire.timezone); SET GLOBAL is refused
        con.execute("SET allowed_configs = ['TimeZone']")
        con.execute("SET lock_configuration = true")

    def session(self) -> SemConnection:
        """A connection for the calling thread's session, with its own TEMP macros."""
        cursor = self._base.cursor()
        self.routed.bind_cursor(cursor)
        install_compat(cursor)
        return SemConnection(cursor, self.routed, self.settings)

    def rewrite(self, sql: str, con: SemConnection) -> str:
        """Route reads of attached PostgreSQL tables to streamed scans (see ``duckdb_sem.pg``)."""
        return self.rewrite_parsed(sql, con)[0]

    def rewrite_parsed(self, sql: str, con: SemConnection) -> tuple[str, Any]:
        """:meth:`rewrite`, and the sqlglot AST of the result when the rewrite parsed it (None
        otherwise), for ``con.sql(..., tree=)``: a statement is parsed once."""
        tree = None
        for source in self.sources:
            sql, tree = source.rewrite_parsed(sql, con.duckdb, tree)
        return str(sql), tree

    def close(self) -> None:
        self._base.close()
