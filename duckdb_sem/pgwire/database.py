"""The one DuckDB database behind a wire server, and a ``SemConnection`` per client session.

DuckDB registers Python UDFs database-wide, so the server installs the ``sem_*`` functions once
in an in-memory catalog, attaches the user's file next to it (read-only when asked) and hands
each session a cursor with its own ``SemConnection``. Which query a UDF batch belongs to is
found per thread (:class:`RoutedSession`): the server runs DuckDB with ``threads=1`` by
default, so a query's UDF calls happen on its session's thread, which makes per-query
statistics and cancellation exact.

Before any client connects, external access is switched off (no files, no ``ATTACH``, no
extensions from SQL) unless the operator allowed it, and DuckDB's configuration is locked so no
client can switch it back.
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
from duckdb_sem.connection import SemConnection
from duckdb_sem.errors import ConfigError, SemError
from duckdb_sem.pgwire.catalog import install_compat
from duckdb_sem.runtime.context import QueryContext
from duckdb_sem.runtime.operators import SemEngine
from duckdb_sem.scheduler.shared import scheduler_for
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
    """A ``SemSession`` whose current query (and last error) is kept per thread."""

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


def _sql_name(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class Database:
    """Owns the DuckDB instance; ``session()`` opens a connection for one client."""

    def __init__(self, options: DatabaseOptions) -> None:
        self.options = options
        overrides: dict[str, Any] = {"backend": options.backend, "scheduler_url": options.scheduler}
        settings = Settings.from_env().with_overrides(**overrides)
        if options.cache is not None:
            settings = replace(settings, cache_path=parse_cache(options.cache))
        self.settings = settings
        self._base = duckdb.connect(":memory:", config={"threads": str(options.threads)})
        self.engine = SemEngine(scheduler_for(settings), batch_size=settings.batch_size)
        self.routed = RoutedSession(self._base, self.engine)
        self.routed.install(shared=True)
        install_compat(self._base)
        self.name = "memory"
        if options.path != ":memory:":
            if not options.read_only and not Path(options.path).parent.exists():
                raise ConfigError(f"directory of database {options.path!r} does not exist")
            stem = re.sub(r"\W+", "_", Path(options.path).stem) or "db"
            self.name = stem if stem not in {"memory", "system", "temp"} else f"{stem}_db"
            mode = " (READ_ONLY)" if options.read_only else ""
            path = options.path.replace("'", "''")
            self._base.execute(f"ATTACH '{path}' AS {_sql_name(self.name)}{mode}")
        self.sources: list[Any] = []
        for alias, dsn in options.postgres:
            from duckdb_sem.pg import attach_postgres

            self.sources.append(attach_postgres(self._base, dsn, alias=alias))
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
            con.execute("SET enable_external_access = false")
            con.execute("SET allow_community_extensions = false")
            con.execute("SET autoinstall_known_extensions = false")
            con.execute("SET autoload_known_extensions = false")
        con.execute("SET lock_configuration = true")

    def session(self) -> SemConnection:
        cursor = self._base.cursor()
        cursor.execute(f"USE {_sql_name(self.name)}")
        path = f"{self.name}.main,memory.main"
        cursor.execute(f"SET search_path = '{path}'")
        return SemConnection(cursor, self.routed, self.settings)

    def rewrite(self, sql: str, con: SemConnection) -> str:
        """Route reads of attached PostgreSQL tables to streamed scans (see ``duckdb_sem.pg``)."""
        for source in self.sources:
            sql = source.rewrite(sql, con.duckdb)
        return str(sql)

    def close(self) -> None:
        self._base.close()
