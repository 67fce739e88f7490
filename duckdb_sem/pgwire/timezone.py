"""The session's ``TimeZone``, as PostgreSQL names and checks it.

``SET TimeZone = 'europe/berlin'`` (or ``SET TIME ZONE``, or a startup ``-c TimeZone=...``)
names an IANA zone in any case; PostgreSQL keeps the zone's own spelling (``Europe/Berlin``),
shows it in ``SHOW TimeZone``, reports it to the client (ParameterStatus) and renders
timestamptz values in it (:func:`~duckdb_sem.pgwire.datetimes.text_timestamptz`). The session's
DuckDB cursor is switched to the same zone, so it also reads ``'2024-01-01 12:00'::timestamptz``
and computes ``hour(ts)`` in it. ``LOCAL`` and ``DEFAULT`` are the server's zone (UTC). An
unknown zone is 22023 with PostgreSQL's message.

Fixed offsets of whole hours are read as PostgreSQL reads them: a POSIX spec such as ``UTC+3``
or ``GMT-02:00`` (pgjdbc sends these; the sign points west, so ``UTC+3`` is three hours behind
UTC) is shown as written, and a number (``SET TIME ZONE -7``, ``'+05'``; the sign points east)
as PostgreSQL shows it, ``<-07>+07``; DuckDB gets the same offset as the IANA zone
``Etc/GMT+7``. Offsets with minutes have no such zone and are refused.
"""

from __future__ import annotations

import functools
import re
import zoneinfo
from dataclasses import dataclass

from duckdb_sem.errors import ConfigError

__all__ = ["SERVER_ZONE", "Zone", "resolve_zone"]

#: the zone a session starts in (what ``LOCAL``, ``DEFAULT`` and ``RESET`` go back to)
SERVER_ZONE = "UTC"


_POSIX = re.compile(r"^(?P<name>[A-Za-z]{3,})(?P<sign>[+-])?(?P<h>\d{1,2})(?::(?P<m>\d{2}))?$")
_NUMBER = re.compile(r"^(?P<sign>[+-])?(?P<h>\d{1,2})(?::(?P<m>\d{2}))?$")


@dataclass(frozen=True, slots=True)
class Zone:
    """A session zone: as ``SHOW TimeZone`` shows it, and the IANA name DuckDB is given."""

    shown: str
    iana: str


@functools.cache
def _zones() -> dict[str, str]:
    return {name.lower(): name for name in zoneinfo.available_timezones()}


def _fixed(text: str) -> Zone | None:
    """A whole-hour offset, POSIX (``UTC+3``: west) or numeric (``-7``: east); else None."""
    if (posix := _POSIX.match(text)) is not None:
        match, west = posix, posix["sign"] != "-"
    elif (number := _NUMBER.match(text)) is not None:
        match, west = number, number["sign"] == "-"
    else:
        return None
    hours = int(match["h"])
    if int(match["m"] or 0) or hours > (12 if west else 14):
        _invalid(text, "only whole-hour offsets from -12 to +14 are read")
    iana = f"Etc/GMT{'+' if west else '-'}{hours}" if hours else "Etc/GMT"
    if match is posix:
        return Zone(text, iana)
    east = "-" if west else "+"
    return Zone(f"<{east}{hours:02d}>{'+' if west else '-'}{hours:02d}", iana)


def _invalid(text: str, why: str) -> None:
    raise ConfigError(f'invalid value for parameter "TimeZone": "{text}" ({why})')


def resolve_zone(value: str) -> Zone:
    """The zone ``value`` names, spelled as PostgreSQL shows it; 22023 if there is none."""
    text = value.strip()
    if len(text) >= 2 and text[0] == text[-1] == "'":
        text = text[1:-1]
    if text.lower() in {"local", "default"}:
        return Zone(SERVER_ZONE, SERVER_ZONE)
    found = _zones().get(text.lower())
    if found is not None:
        return Zone(found, found)
    fixed = _fixed(text)
    if fixed is None:
        _invalid(text, "name a zone of the IANA database, e.g. 'Europe/Berlin' or 'UTC'")
    assert fixed is not None
    return fixed
