"""What a session may run: the rules that keep sessions from changing each other's world.

All sessions share one DuckDB instance, so anything instance-wide is off limits to SQL:

- ``ATTACH`` (even of ``:memory:``) and ``DETACH``: the catalogs are the server's. With
  ``--external-access`` the operator may let clients ``ATTACH``; the server's own catalogs
  still cannot be detached.
- ``CREATE``/``DROP`` of a macro or function named like a duckdb-sem function (``sem_*``,
  ``__sem*``, the catalog compat macros): those are per-session TEMP macros over the UDFs in
  DuckDB's ``system`` catalog, and a look-alike in the user's file would only mislead.
- ``CREATE``/``DROP SECRET``: secrets are instance-wide.
- A ``--read-only`` server refuses every statement that writes (temporary objects too), like a
  PostgreSQL hot standby: SQLSTATE 25006.

Everything else a session changes is either its own (temporary objects, prepared statements,
variables) or the user's database, shared as a PostgreSQL database is.

Example: ``DETACH memory`` -> ``42501 DETACH is not allowed ...``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from duckdb_sem.errors import ReadOnlyError, RefusedError
from duckdb_sem.pgwire.statements import Parsed, T, prepared_parts

__all__ = ["Policy"]

_NAME = r'(?:"(?:[^"]|"")+"|[\w$]+)'
_ROUTINE = re.compile(
    r"^(?:CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMP\s+|TEMPORARY\s+)?|DROP\s+)"
    rf"(?:MACRO|FUNCTION)\s+(?:TABLE\s+)?(?:IF\s+(?:NOT\s+)?EXISTS\s+)?(?P<name>{_NAME}(?:\.{_NAME})*)",
    re.I,
)
_SECRET = re.compile(
    r"^(?:CREATE\s+(?:OR\s+REPLACE\s+)?(?:PERSISTENT\s+|TEMP\s+|TEMPORARY\s+)?|DROP\s+"
    r"(?:PERSISTENT\s+|TEMP\s+|TEMPORARY\s+)?)SECRET\b",
    re.I,
)
_TIME_ZONE = re.compile(r"time\W*zone", re.I)
_VARIABLE = re.compile(r"^\s*(?:SET|RESET)\s+VARIABLE\b", re.I)
_DETACH = re.compile(rf"^DETACH\s+(?:DATABASE\s+)?(?:IF\s+EXISTS\s+)?(?P<name>{_NAME})", re.I)


def _unquote(name: str) -> str:
    last = str(re.findall(_NAME, name)[-1])
    return last[1:-1].replace('""', '"') if last.startswith('"') else last.lower()


@dataclass(frozen=True, slots=True)
class Policy:
    read_only: bool
    external_access: bool
    #: catalogs the server attached (the database, PostgreSQL sources); never detached
    catalogs: frozenset[str]
    #: function and macro names that are duckdb-sem's (besides ``sem_*`` and ``__sem*``)
    reserved: frozenset[str] = frozenset()

    def check(self, parsed: Parsed) -> None:
        """Raise :class:`RefusedError` or :class:`ReadOnlyError` if ``parsed`` may not run."""
        if parsed.explained is not None:  # EXPLAIN ANALYZE runs its statement
            self.check(parsed.explained)
        text = parsed.text
        if parsed.type == T.ATTACH and not self.external_access:
            raise RefusedError(
                "ATTACH is not allowed: every session shares the server's catalogs; attach "
                "sources when starting the server (--postgres), or start it with --external-access"
            )
        if parsed.type == T.DETACH:
            match = _DETACH.match(text)
            name = _unquote(match["name"]) if match else ""
            if not self.external_access or name in self.catalogs or name in {"system", "temp"}:
                raise RefusedError(
                    f"DETACH is not allowed: {name or 'that catalog'} is attached by the server "
                    "and shared by every session"
                )
        if match := _ROUTINE.match(text):
            name = _unquote(match["name"])
            if name.startswith(("sem_", "__sem")) or name in self.reserved:
                raise RefusedError(
                    f"{name} is a duckdb-sem function and cannot be created or dropped: "
                    "choose another name"
                )
        if parsed.type == T.SET and _TIME_ZONE.search(text) and not _VARIABLE.match(text):
            # the one DuckDB setting a session may change (its own cursor's, pgwire.timezone)
            raise RefusedError(
                "TimeZone is each session's own: use SET TimeZone = 'Europe/Berlin' (SET GLOBAL "
                "or PRAGMA would change it for every session)"
            )
        if _SECRET.match(text):
            raise RefusedError("secrets are shared by every session: configure them on the server")
        if self.read_only:
            self._check_read_only(parsed)

    def _check_read_only(self, parsed: Parsed) -> None:
        inner = prepared_parts(parsed) if parsed.type == T.PREPARE else None
        target = inner[1] if inner else (parsed.explained or parsed)
        if target.writes:
            verb = " ".join(target.text.split()[:1]).upper() or target.type.name
            raise ReadOnlyError(
                f"cannot execute {verb} in a read-only transaction (the server runs with "
                "--read-only)"
            )
