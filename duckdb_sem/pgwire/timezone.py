"""The session's ``TimeZone``, as PostgreSQL names and checks it.

``SET TimeZone = 'europe/berlin'`` (or ``SET TIME ZONE``, or a startup ``-c TimeZone=...``)
names an IANA zone in any case; PostgreSQL keeps the zone's own spelling (``Europe/Berlin``),
shows it in ``SHOW TimeZone``, reports it to the client (ParameterStatus) and renders
timestamptz values in it (:func:`~duckdb_sem.pgwire.encoders.text_timestamptz`). The session's
DuckDB cursor is switched to the same zone, so it also reads ``'2024-01-01 12:00'::timestamptz``
and computes ``hour(ts)`` in it. ``LOCAL`` and ``DEFAULT`` are the server's zone (UTC). An
unknown zone is 22023 with PostgreSQL's message.
"""

from __future__ import annotations

import functools
import zoneinfo

from duckdb_sem.errors import ConfigError

__all__ = ["SERVER_ZONE", "resolve_zone"]

#: the zone a session starts in (what ``LOCAL``, ``DEFAULT`` and ``RESET`` go back to)
SERVER_ZONE = "UTC"


@functools.cache
def _zones() -> dict[str, str]:
    return {name.lower(): name for name in zoneinfo.available_timezones()}


def resolve_zone(value: str) -> str:
    """The zone ``value`` names, spelled as PostgreSQL shows it; 22023 if there is none."""
    text = value.strip()
    if len(text) >= 2 and text[0] == text[-1] == "'":
        text = text[1:-1]
    if text.lower() in {"local", "default"}:
        return SERVER_ZONE
    found = _zones().get(text.lower())
    if found is None:
        raise ConfigError(
            f'invalid value for parameter "TimeZone": "{text}" (name a zone of the IANA '
            "database, e.g. 'Europe/Berlin' or 'UTC')"
        )
    return found
