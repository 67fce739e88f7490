"""Steps played on two sessions of one server (PostgreSQL 15 or ``duckdb-sem pgwire``), with
what each step answered: the oracle runs of the transaction tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import psycopg

__all__ = ["Seen", "Side", "play_once"]


@dataclass
class Seen:
    """What one step answered: its SQLSTATE (None: success), command tag and rows."""

    sqlstate: str | None
    status: str | None
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)


class Side:
    """Sessions ``a`` and ``b`` (autocommit: the steps' BEGIN and COMMIT are their own) of one
    server, PostgreSQL or ours."""

    def __init__(self, dsn: str, setup: list[str], *, schema: str | None = None) -> None:
        options = {"options": f"-c search_path={schema}"} if schema else {}
        self._notices: list[str] = []
        self.sessions: dict[str, psycopg.Connection[Any]] = {}
        for who in ("a", "b"):
            con = psycopg.connect(dsn, autocommit=True, **options)
            con.add_notice_handler(self._notice)
            self.sessions[who] = con
        for sql in setup:
            self.sessions["a"].execute(sql)

    def _notice(self, diag: psycopg.errors.Diagnostic) -> None:
        self._notices.append(diag.message_primary or "")

    def step(self, who: str, sql: str) -> Seen:
        self._notices.clear()
        cur = self.sessions[who].cursor()
        try:
            cur.execute(sql)
        except psycopg.Error as err:
            return Seen(err.sqlstate, None, notices=list(self._notices))
        rows = cur.fetchall() if cur.description else []
        return Seen(None, cur.statusmessage, rows, list(self._notices))

    def play(self, steps: list[tuple[str, str]]) -> list[Seen]:
        return [self.step(who, sql) for who, sql in steps]

    def close(self) -> None:
        for con in self.sessions.values():
            con.close()


def play_once(dsn: str, setup: list[str], steps: list[tuple[str, str]]) -> list[Seen]:
    """``steps`` on two fresh sessions of the server at ``dsn``, after ``setup``."""
    side = Side(dsn, setup)
    try:
        return side.play(steps)
    finally:
        side.close()
