"""Dates, times, timestamps and intervals onto the wire, from their integers.

PostgreSQL's ``date_out``, ``time_out``, ``timestamp_out``, ``timestamptz_out`` and
``interval_out`` (DateStyle ``ISO``, IntervalStyle ``postgres``) and their send formats, written
over the integers DuckDB keeps (days since 1970-01-01, microseconds) rather than Python's
``datetime``, which holds neither ``infinity``, BC years, years past 9999 nor ``24:00:00``.
:mod:`.columns` turns an Arrow column into these integers.

Example: ``text_date(2**31 - 1)`` is ``b"infinity"``; ``text_date(-735_160)`` is
``b"0044-03-15 BC"`` (astronomical year -43); ``text_time(86_400_000_000)`` is ``b"24:00:00"``;
``text_interval((-14, 3, -14_706_000_000))`` is ``b"-1 years -2 mons +3 days -04:05:06"``.
"""

from __future__ import annotations

import datetime as dt
import functools
import struct
import zoneinfo

from duckdb_sem.errors import UnsendableValueError
from duckdb_sem.pgwire.encoders import Encoder

__all__ = [
    "Interval",
    "bin_date",
    "bin_interval",
    "bin_time",
    "bin_timestamp",
    "civil",
    "text_date",
    "text_interval",
    "text_time",
    "text_timestamp",
    "text_timestamptz",
]

#: an interval as PostgreSQL keeps it: (months, days, microseconds)
Interval = tuple[int, int, int]

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
_DAY_US = 86_400_000_000
#: 2000-01-01, PostgreSQL's epoch, in DuckDB's days and microseconds since 1970-01-01
_PG_EPOCH_DAYS = 10_957
_PG_EPOCH_US = _PG_EPOCH_DAYS * _DAY_US
#: the Gregorian calendar repeats every 400 years, weekdays included
_CYCLE_S = 146_097 * 86_400
#: the seconds Python's datetime can hold, two days in from either end
_FIRST_S = -62_135_596_800 + 2 * 86_400
_LAST_S = 253_402_300_800 - 2 * 86_400


def civil(days: int) -> tuple[int, int, int]:
    """(year, month, day) of a day number since 1970-01-01: proleptic Gregorian, astronomical
    years (0 is 1 BC), H. Hinnant's ``civil_from_days``."""
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


def _day(days: int) -> tuple[str, str]:
    """``2024-02-29`` and ``""``, or ``0044-03-15`` and ``" BC"``."""
    year, month, day = civil(days)
    if year <= 0:
        return f"{1 - year:04d}-{month:02d}-{day:02d}", " BC"
    return f"{year:04d}-{month:02d}-{day:02d}", ""


def _clock(micros: int) -> str:
    """``04:05:06.789``: the fraction's trailing zeros cut, hours past 24 kept (intervals)."""
    seconds, frac = divmod(micros, 1_000_000)
    hours, rest = divmod(seconds, 3600)
    text = f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
    return text + (f".{frac:06d}".rstrip("0") if frac else "")


def text_date(days: int) -> bytes:
    if days in (INT32_MAX, -INT32_MAX):  # DuckDB's infinities
        return b"infinity" if days > 0 else b"-infinity"
    text, era = _day(days)
    return (text + era).encode()


def text_time(micros: int) -> bytes:
    return _clock(micros).encode()


def _stamp(micros: int, zone: str) -> str:
    days, rest = divmod(micros, _DAY_US)
    text, era = _day(days)
    return f"{text} {_clock(rest)}{zone}{era}"


def text_timestamp(micros: int) -> bytes:
    if micros in (INT64_MAX, -INT64_MAX):
        return b"infinity" if micros > 0 else b"-infinity"
    return _stamp(micros, "").encode()


def _offset_text(seconds: int) -> str:
    """``+01``, ``-03:30``, ``+00:53:28`` as PostgreSQL's ``EncodeTimezone`` writes them."""
    sign = "-" if seconds < 0 else "+"
    hours, rest = divmod(abs(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{sign}{hours:02d}"
    if minutes or secs:
        text += f":{minutes:02d}"
    return text + (f":{secs:02d}" if secs else "")


def _utc_offset(zone: zoneinfo.ZoneInfo, micros: int) -> int:
    """Seconds east of UTC in ``zone`` at the instant ``micros``; an instant outside Python's
    years 1 to 9999 is moved by whole 400-year cycles into them (before a zone's first
    transition its offset is its local mean time, after the last its rule repeats yearly)."""
    seconds = micros // 1_000_000
    if seconds < _FIRST_S:
        seconds += -(-(_FIRST_S - seconds) // _CYCLE_S) * _CYCLE_S
    elif seconds > _LAST_S:
        seconds -= -(-(seconds - _LAST_S) // _CYCLE_S) * _CYCLE_S
    offset = dt.datetime.fromtimestamp(seconds, zone).utcoffset()
    return 0 if offset is None else int(offset.total_seconds())


@functools.cache
def text_timestamptz(zone: str | None) -> Encoder:
    """The text encoder of timestamptz values shown in ``zone`` (the Arrow column's, which is
    the session's ``TimeZone``): ``2024-01-01 13:00:00+01``, ``0044-03-15 12:00:00+00 BC``."""
    tz = None if zone in (None, "UTC", "Etc/UTC") else zoneinfo.ZoneInfo(str(zone))

    def encode(micros: int) -> bytes:
        if micros in (INT64_MAX, -INT64_MAX):
            return b"infinity" if micros > 0 else b"-infinity"
        offset = 0 if tz is None else _utc_offset(tz, micros)
        return _stamp(micros + offset * 1_000_000, _offset_text(offset)).encode()

    return encode


def _trunc_div(a: int, b: int) -> tuple[int, int]:
    """C's division: the quotient rounds toward zero, the remainder has the dividend's sign."""
    q = abs(a) // b * (1 if a >= 0 else -1)
    return q, a - q * b


def text_interval(v: Interval) -> bytes:
    """``EncodeInterval`` in IntervalStyle ``postgres``: a field after a negative one gets its
    ``+`` (``-1 years -2 mons +3 days``), ``-1 years`` is plural as PostgreSQL writes it."""
    months, days, micros = v
    years, mons = _trunc_div(months, 12)
    parts: list[str] = []
    before = False
    for value, unit in ((years, "year"), (mons, "mon"), (days, "day")):
        if value:
            sign = "+" if before and value > 0 else ""
            parts.append(f"{sign}{value} {unit}{'' if value == 1 else 's'}")
            before = value < 0
    if not parts or micros:
        sign = "-" if micros < 0 else "+" if before else ""
        parts.append(sign + _clock(abs(micros)))
    return " ".join(parts).encode()


_I32 = struct.Struct("!i")
_I64 = struct.Struct("!q")
_INTERVAL = struct.Struct("!qii")


def bin_date(days: int) -> bytes:
    """Days since 2000-01-01; ``infinity`` and ``-infinity`` as PostgreSQL's INT32 ends."""
    if days in (INT32_MAX, -INT32_MAX):
        return _I32.pack(INT32_MAX if days > 0 else -INT32_MAX - 1)
    if days - _PG_EPOCH_DAYS < -INT32_MAX:
        raise UnsendableValueError(
            f"date {text_date(days).decode()} is before PostgreSQL's binary date range: read "
            "the column in text format, or as ::VARCHAR"
        )
    return _I32.pack(days - _PG_EPOCH_DAYS)


def bin_time(micros: int) -> bytes:
    return _I64.pack(micros)


def bin_timestamp(micros: int) -> bytes:
    """Microseconds since 2000-01-01 UTC (a timestamptz is its instant, whatever the zone)."""
    if micros in (INT64_MAX, -INT64_MAX):
        return _I64.pack(INT64_MAX if micros > 0 else -INT64_MAX - 1)
    return _I64.pack(micros - _PG_EPOCH_US)


def bin_interval(v: Interval) -> bytes:
    months, days, micros = v
    return _INTERVAL.pack(micros, days, months)
