"""``COPY ... TO STDOUT`` through the COPY sub-protocol (psql ``\\copy``, psycopg ``copy()``).

The session runs the query (``COPY (query) TO STDOUT`` or ``COPY table [(columns)] TO STDOUT``)
like any other and sends CopyOutResponse, one CopyData per row, CopyDone and ``COPY n``. Rows
are written as PostgreSQL writes them: text format (tab-separated, ``\\N`` for NULL, backslash
escapes) or CSV (``,``, NULL as an empty field, the empty string as ``""``), with the options of
both the ``WITH (FORMAT csv, HEADER true, DELIMITER ';', NULL 'x')`` and the old ``WITH CSV
HEADER`` spellings. ``BINARY`` is refused (0A000).

Example: ``COPY (SELECT 1 AS a, NULL AS b, 'x,y' AS c) TO STDOUT WITH (FORMAT csv, HEADER)``
sends ``a,b,c`` then ``1,,"x,y"``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from duckdb_sem.errors import PlanError

__all__ = ["CopyFormat", "copy_format", "encode_line"]

_QUOTED = r"'((?:[^']|'')*)'"


@dataclass(frozen=True, slots=True)
class CopyFormat:
    csv: bool = False
    header: bool = False
    delimiter: str = "\t"
    null: str = "\\N"


def _string_option(name: str, options: str) -> str | None:
    match = re.search(rf"\b{name}\s+(?:AS\s+)?{_QUOTED}", options, re.I)
    return match.group(1).replace("''", "'") if match else None


def copy_format(options: str) -> CopyFormat:
    """The format an options clause asks for (anything not understood: PostgreSQL's default)."""
    if re.search(r"\bBINARY\b", options, re.I):
        raise PlanError("COPY ... TO STDOUT in BINARY format is not supported: use text or CSV")
    csv = bool(re.search(r"\bCSV\b", options, re.I))
    header = bool(re.search(r"\bHEADER\b(?!\s+(?:false|off|0)\b)", options, re.I))
    delimiter = _string_option("DELIMITER", options) or ("," if csv else "\t")
    null = _string_option("NULL", options)
    if len(delimiter) != 1:
        raise PlanError(f"COPY delimiter must be a single one-byte character, not {delimiter!r}")
    return CopyFormat(csv, header, delimiter, ("" if csv else "\\N") if null is None else null)


def _text_field(value: str, fmt: CopyFormat) -> str:
    out = value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    out = out.replace("\t", "\\t") if fmt.delimiter == "\t" else out
    return out.replace(fmt.delimiter, "\\" + fmt.delimiter)


def _csv_field(value: str, fmt: CopyFormat) -> str:
    special = (
        value == fmt.null
        or value == "\\."
        or any(c in value for c in (fmt.delimiter, '"', "\n", "\r"))
    )
    return '"' + value.replace('"', '""') + '"' if special else value


def encode_line(values: Sequence[str | None], fmt: CopyFormat) -> bytes:
    """One row (values already in PostgreSQL's text form; None is NULL) as a COPY line."""
    field: Callable[[str, CopyFormat], str] = _csv_field if fmt.csv else _text_field
    cells = [fmt.null if v is None else field(v, fmt) for v in values]
    return (fmt.delimiter.join(cells) + "\n").encode("utf-8")
