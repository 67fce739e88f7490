"""How each PostgreSQL type is read: what ``COPY`` selects, how Arrow parses it, what DuckDB sees.

PostgreSQL's text output is not always something Arrow's CSV reader can parse (``infinity``,
``2024-01-01 BC``, ``\\x0102``, ``{1,NULL}``, ``1 year 2 mons``), so a column may be selected
as another expression (a date as its day number, a timestamp as epoch microseconds, an array of
strings as JSON) and, where Arrow has no cast to the final type, converted by DuckDB
(``convert``: an expression over the parsed column ``{c}``). Infinite dates and timestamps become DuckDB's
``infinity``/``-infinity``, which DuckDB stores as the largest and smallest values of the
underlying integer, the same integers Arrow hands over. Types without a DuckDB equivalent arrive
as PostgreSQL's own text, so nothing is lost (docs/pgwire.md lists them).

Example:
    ``read_as("date").select('"d"')`` is ``CASE WHEN "d" = 'infinity' THEN 2147483647 ...``
    ``END``, parsed as ``int32`` and cast to ``date32``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

__all__ = ["PgRead", "read_as"]

_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class PgRead:
    """The read of one column type; ``select`` and ``convert`` are templates over ``{c}``."""

    duck_type: str  # the DuckDB type of the column
    parse: pa.DataType  # the Arrow type the CSV field is parsed as
    final: pa.DataType | None = None  # Arrow cast after parsing (None: as parsed or converted)
    select_template: str = "{c}"
    convert: str | None = None  # DuckDB expression turning the parsed column into duck_type

    def select(self, quoted: str) -> str:
        """The expression ``COPY`` selects for the column ``quoted``, named as the column."""
        if self.select_template == "{c}":
            return quoted
        return self.select_template.format(c=quoted) + f" AS {quoted}"


_TEXT = PgRead("VARCHAR", pa.string())
_EPOCH_US = "(extract(epoch FROM {c}) * 1000000)::int8"
_INFINITE_US = (
    f"CASE WHEN {{c}} = 'infinity' THEN {_INT64_MAX} WHEN {{c}} = '-infinity' "
    f"THEN -{_INT64_MAX} ELSE {_EPOCH_US} END"
)
_SIMPLE = {
    "smallint": PgRead("SMALLINT", pa.int16()),
    "integer": PgRead("INTEGER", pa.int32()),
    "bigint": PgRead("BIGINT", pa.int64()),
    "real": PgRead("FLOAT", pa.float32()),
    "double precision": PgRead("DOUBLE", pa.float64()),
    "boolean": PgRead("BOOLEAN", pa.bool_()),
    "oid": PgRead("BIGINT", pa.int64()),
    "date": PgRead(
        "DATE",
        pa.int32(),
        pa.date32(),
        f"CASE WHEN {{c}} = 'infinity' THEN {_INT32_MAX} WHEN {{c}} = '-infinity' "
        f"THEN -{_INT32_MAX} ELSE {{c}} - DATE '1970-01-01' END",
    ),
    "time without time zone": PgRead("TIME", pa.int64(), pa.time64("us"), _EPOCH_US),
    "timestamp without time zone": PgRead(
        "TIMESTAMP", pa.int64(), pa.timestamp("us"), _INFINITE_US
    ),
    "timestamp with time zone": PgRead(
        "TIMESTAMPTZ", pa.int64(), pa.timestamp("us", tz="UTC"), _INFINITE_US
    ),
    # months, days and microseconds, the three fields of both types, as "m d us"
    "interval": PgRead(
        "INTERVAL",
        pa.string(),
        select_template=(
            "(extract(year FROM {c}) * 12 + extract(month FROM {c}))::int8::text || ' ' || "
            "extract(day FROM {c})::int8::text || ' ' || (extract(hour FROM {c}) * 3600000000 "
            "+ extract(minute FROM {c}) * 60000000 + extract(microseconds FROM {c}))::int8::text"
        ),
        convert=(
            "to_months(CAST(split_part({c}, ' ', 1) AS INTEGER)) + "
            "to_days(CAST(split_part({c}, ' ', 2) AS INTEGER)) + "
            "to_microseconds(CAST(split_part({c}, ' ', 3) AS BIGINT))"
        ),
    ),
    # PostgreSQL's hex output (bytea_output is set to hex for the read)
    "bytea": PgRead("BLOB", pa.string(), convert="from_hex(substr({c}, 3))"),
}
# one-dimensional arrays of these element types become DuckDB lists
_ELEMENTS = {
    "smallint": "SMALLINT",
    "integer": "INTEGER",
    "bigint": "BIGINT",
    "real": "FLOAT",
    "double precision": "DOUBLE",
    "boolean": "BOOLEAN",
    "text": "VARCHAR",
    "character varying": "VARCHAR",
}


def _numeric(args: str) -> PgRead:
    parts = [p.strip() for p in args.rstrip(")").split(",") if p.strip()]
    if not parts or int(parts[0]) > 38:
        return _TEXT  # DECIMAL holds 38 digits: beyond that, or unconstrained, exact text
    precision, scale = int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    # NaN is the one non-number a constrained numeric may hold; DECIMAL has none
    return PgRead(
        f"DECIMAL({precision},{scale})",
        pa.decimal128(precision, scale),
        select_template="NULLIF({c}, 'NaN')",
    )


def _array(element: str) -> PgRead:
    if element not in _ELEMENTS:
        return _TEXT
    duck = f"{_ELEMENTS[element]}[]"
    # A multi-dimensional value is sent whole ('{{1,2},{3,4}}') and fails the conversion.
    whole = "CASE WHEN array_ndims({c}) > 1 THEN {c}::text ELSE "
    if duck == "VARCHAR[]":  # strings through JSON, which quotes them
        return PgRead(
            duck,
            pa.string(),
            select_template=whole + "array_to_json({c})::text END",
            convert=f"CAST(CAST({{c}} AS JSON) AS {duck})",
        )
    # Numbers and booleans hold no comma: 'e1,e2,NULL' keeps -0, NaN and Infinity, which JSON
    # would not.
    return PgRead(
        duck,
        pa.string(),
        select_template=whole + "array_to_string({c}, ',', 'NULL') END",
        convert=(
            f"CASE WHEN {{c}} = '' THEN []::{duck} ELSE list_transform(string_split({{c}}, ','), "
            f"lambda x: CASE WHEN x = 'NULL' THEN NULL ELSE CAST(x AS {_ELEMENTS[element]}) END) "
            "END"
        ),
    )


def read_as(pg_type: str) -> PgRead:
    """How a column of ``pg_type`` (``format_type()`` spelling) is read; unknown types: text."""
    if pg_type.endswith("[]") and not pg_type.endswith("[][]"):
        return _array(pg_type[:-2].split("(")[0])
    kind, _, args = pg_type.partition("(")
    if kind == "interval" or kind.startswith("interval "):
        return _SIMPLE["interval"]  # interval(3), interval day to second: the same three fields
    if kind == "numeric":
        return _numeric(args)
    if kind.startswith(("timestamp", "time")) and args:
        # timestamp(3) with time zone: the precision sits inside the name
        kind = kind + args.split(")", 1)[1] if ")" in args else kind
    return _SIMPLE.get(kind.strip(), _TEXT)
