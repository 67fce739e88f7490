"""Typed outputs: which SQL types ``sem_map`` can return, how to ask for them, how to parse them.

Supported: ``VARCHAR``, ``INTEGER``, ``BIGINT``, ``DOUBLE``, ``BOOLEAN``, ``DATE``, ``JSON``,
``ENUM('a', 'b', ...)``, lists of those (``VARCHAR[]``) and ``STRUCT(name TYPE, ...)`` of
those. Everything else is an :class:`~duckdb_sem.errors.OutputTypeError` at bind time, before
any LLM call. An ENUM is a closed answer set (at least two distinct labels): the answer is one
of its labels, returned as VARCHAR (:attr:`TypeSpec.column_sql`: DuckDB's Arrow import has no
ENUM, so the planned road could not return one; ``::ENUM(...)`` casts it). A DATE is read
from ISO 8601 ``YYYY-MM-DD`` into ``datetime.date``; a JSON answer is valid JSON text, returned
as VARCHAR for the same reason (DuckDB's export to Arrow drops the JSON type; ``::JSON`` casts
it, and DuckDB's JSON functions read the VARCHAR as it is).

Example:
    >>> spec = parse_type("STRUCT(year INTEGER, tags VARCHAR[])")
    >>> spec.parse('{"year": 1999, "tags": ["a", "b"]}')
    {'year': 1999, 'tags': ['a', 'b']}
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import sqlglot
from sqlglot import exp

from duckdb_sem.errors import OutputTypeError
from duckdb_sem.llm.scalars import (
    OutputParseError,
    dump_json,
    read_date_value,
    read_label,
    read_scalar,
)

__all__ = [
    "SUPPORTED_TYPES",
    "OutputParseError",
    "TypeSpec",
    "json_schema",
    "parse_type",
    "to_arrow",
    "type_from_schema",
]

SUPPORTED_TYPES = (
    "VARCHAR",
    "INTEGER",
    "BIGINT",
    "DOUBLE",
    "BOOLEAN",
    "DATE",
    "JSON",
    "ENUM('a', 'b', ...)",
    "T[]",
    "STRUCT(name T, ...)",
)

_SCALARS: dict[object, tuple[str, pa.DataType]] = {
    exp.DataType.Type.VARCHAR: ("VARCHAR", pa.string()),
    exp.DataType.Type.TEXT: ("VARCHAR", pa.string()),
    exp.DataType.Type.INT: ("INTEGER", pa.int32()),
    exp.DataType.Type.BIGINT: ("BIGINT", pa.int64()),
    exp.DataType.Type.DOUBLE: ("DOUBLE", pa.float64()),
    exp.DataType.Type.FLOAT: ("DOUBLE", pa.float64()),
    exp.DataType.Type.BOOLEAN: ("BOOLEAN", pa.bool_()),
    exp.DataType.Type.DATE: ("DATE", pa.date32()),
    exp.DataType.Type.JSON: ("JSON", pa.string()),  # valid JSON text
}


@dataclass(frozen=True, slots=True)
class TypeSpec:
    """A validated output type: its canonical SQL, Arrow type and parser."""

    sql: str
    arrow: pa.DataType
    kind: str  # "scalar", "list" or "struct"
    children: tuple[tuple[str, TypeSpec], ...] = ()
    labels: tuple[str, ...] = ()  # an ENUM's values, in order

    @property
    def is_text(self) -> bool:
        return self.sql == "VARCHAR"

    @property
    def is_json(self) -> bool:
        """Whether answers are JSON documents (a list, a STRUCT, JSON): what
        :func:`~duckdb_sem.llm.scalars.close_json` can finish when one is cut off."""
        return self.kind != "scalar" or self.sql == "JSON"

    @property
    def column_sql(self) -> str:
        """The DuckDB type of the returned column: :attr:`sql` with ENUM and JSON as VARCHAR
        (see the module docstring)."""
        if self.labels or self.sql == "JSON":
            return "VARCHAR"
        if self.kind == "list":
            ((_, child),) = self.children
            return f"{child.column_sql}[]"
        if self.kind == "struct":
            fields = ", ".join(f'"{n}" {c.column_sql}' for n, c in self.children)
            return f"STRUCT({fields})"
        return self.sql

    def format_hint(self) -> str:
        """What to tell the model about the expected answer format."""
        if self.labels:
            return "Answer with one of: " + ", ".join(self.labels) + "."
        if self.kind == "scalar":
            return {
                "VARCHAR": "Answer with the text only.",
                "INTEGER": "Answer with a single integer only.",
                "BIGINT": "Answer with a single integer only.",
                "DOUBLE": "Answer with a single number only.",
                "BOOLEAN": "Answer with yes or no only.",
                "DATE": "Answer with a date only, written YYYY-MM-DD.",
                "JSON": "Answer with JSON only.",
            }[self.sql]
        if self.kind == "list":
            return 'Answer with a JSON array only, for example ["a", "b"].'
        fields = ", ".join(f'"{name}": <{_placeholder(child)}>' for name, child in self.children)
        return "Answer with a JSON object only: {" + fields + "}."

    def parse(self, text: str) -> Any:
        """Parse raw model output; raise :class:`OutputParseError` when it does not fit."""
        if self.labels:
            return read_label(text, self.labels)
        if self.kind == "scalar":
            return read_scalar(self.sql, text)
        data = _load_json(text, "[" if self.kind == "list" else "{")
        return self.coerce(data)

    def coerce(self, data: Any) -> Any:
        """Validate an already decoded JSON value against this type."""
        if data is None:
            return None
        if self.labels:
            return read_label(data if isinstance(data, str) else json.dumps(data), self.labels)
        if self.kind == "scalar":
            if self.sql == "VARCHAR":
                return data if isinstance(data, str) else json.dumps(data)
            if self.sql == "JSON":
                return dump_json(data)
            if self.sql == "DATE":
                return read_date_value(data)
            return read_scalar(self.sql, str(data))
        if self.kind == "list":
            if not isinstance(data, list):
                raise OutputParseError(f"expected a JSON array, got {type(data).__name__}")
            ((_, child),) = self.children
            return [child.coerce(item) for item in data]
        if not isinstance(data, dict):
            raise OutputParseError(f"expected a JSON object, got {type(data).__name__}")
        lowered = {str(k).lower(): v for k, v in data.items()}
        return {name: child.coerce(lowered.get(name.lower())) for name, child in self.children}

    @property
    def has_date(self) -> bool:
        return self.sql == "DATE" or any(child.has_date for _, child in self.children)


def parse_type(type_sql: str) -> TypeSpec:
    """Validate a ``sem_map`` output type string such as ``'INTEGER'`` or ``'STRUCT(a INT)'``."""
    if not type_sql or not type_sql.strip():
        raise OutputTypeError(f"empty output type; use one of {', '.join(SUPPORTED_TYPES)}")
    try:
        node = exp.DataType.build(type_sql, dialect="duckdb")
    except (sqlglot.errors.ParseError, ValueError) as err:
        raise OutputTypeError(
            f"cannot parse output type {type_sql!r}: {err}; use one of {', '.join(SUPPORTED_TYPES)}"
        ) from None
    return _from_node(node, type_sql)


def _from_node(node: exp.DataType, original: str) -> TypeSpec:
    if node.this in _SCALARS:
        sql, arrow = _SCALARS[node.this]
        return TypeSpec(sql, arrow, "scalar")
    if node.this == exp.DataType.Type.ENUM:
        labels = _enum_labels(node, original)
        sql = "ENUM(" + ", ".join("'" + label.replace("'", "''") + "'" for label in labels) + ")"
        return TypeSpec(sql, pa.string(), "scalar", labels=labels)
    if node.this == exp.DataType.Type.ARRAY and node.expressions:
        child = _from_node(node.expressions[0], original)
        return TypeSpec(f"{child.sql}[]", pa.list_(child.arrow), "list", (("item", child),))
    if node.this == exp.DataType.Type.STRUCT and node.expressions:
        children: list[tuple[str, TypeSpec]] = []
        for col in node.expressions:
            if not isinstance(col, exp.ColumnDef) or not isinstance(
                col.args.get("kind"), exp.DataType
            ):
                raise OutputTypeError(f"STRUCT fields need a name and a type in {original!r}")
            children.append((col.name, _from_node(col.args["kind"], original)))
        names = [name for name, _ in children]
        if len(set(names)) != len(names):
            raise OutputTypeError(f"duplicate STRUCT field names in {original!r}")
        sql = "STRUCT(" + ", ".join(f'"{n}" {c.sql}' for n, c in children) + ")"
        arrow = pa.struct([pa.field(n, c.arrow) for n, c in children])
        return TypeSpec(sql, arrow, "struct", tuple(children))
    raise OutputTypeError(
        f"unsupported output type {original!r}; use one of {', '.join(SUPPORTED_TYPES)}"
    )


def _enum_labels(node: exp.DataType, original: str) -> tuple[str, ...]:
    """An ENUM's labels: string literals, at least two, distinct, non-empty."""
    example = "e.g. ENUM(''positive'', ''negative'') inside the SQL string"
    values = node.expressions
    if not all(isinstance(v, exp.Literal) and v.is_string for v in values):
        raise OutputTypeError(f"ENUM labels must be quoted strings in {original!r}, {example}")
    labels = tuple(str(v.this) for v in values)
    if any(not label.strip() for label in labels):
        raise OutputTypeError(f"ENUM labels must not be empty in {original!r}")
    if len(set(labels)) != len(labels):
        raise OutputTypeError(f"ENUM labels must be distinct in {original!r}")
    if len(labels) < 2:
        raise OutputTypeError(
            f"ENUM needs at least two labels to choose from, got {original!r}; {example}"
        )
    return labels


def _placeholder(spec: TypeSpec) -> str:
    return " or ".join(f'"{label}"' for label in spec.labels) if spec.labels else spec.sql


def _load_json(text: str, opener: str) -> Any:
    closer = "]" if opener == "[" else "}"
    start, end = text.find(opener), text.rfind(closer)
    if start < 0 or end <= start:
        raise OutputParseError(f"expected JSON starting with {opener!r}, got {text[:60]!r}")
    try:
        return json.loads(text[start : end + 1])
    except json.JSONDecodeError as err:
        raise OutputParseError(f"invalid JSON ({err.msg}) in {text[:60]!r}") from None


def to_arrow(spec: TypeSpec, values: Sequence[Any]) -> pa.Array:
    """Answers as an Arrow array of ``spec``; dates a cache or a wire returned as ISO text
    (JSON has no dates) are read back first."""
    if spec.has_date:
        values = [_dates_back(spec, v) for v in values]
    return pa.array(values, type=spec.arrow)


def _dates_back(spec: TypeSpec, value: Any) -> Any:
    if value is None:
        return None
    if spec.sql == "DATE":
        return value if isinstance(value, datetime.date) else read_date_value(value)
    if spec.kind == "list":
        ((_, child),) = spec.children
        return [_dates_back(child, v) for v in value]
    if spec.kind == "struct":
        return {name: _dates_back(child, value.get(name)) for name, child in spec.children}
    return value


# A calendar date, YYYY-MM-DD (February stops at 28: a pattern cannot know leap years). The
# pattern, not the format, is what llama.cpp's schema converter turns into a grammar (it
# allows 02-31 for ``format: date``); vLLM and OpenAI honour both. Groups are plain (no
# ``(?:``): llama.cpp's converter accepts no other.
_DATE_PATTERN = (
    r"^[1-9][0-9]{3}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])"
    r"|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))$"
)

_SCHEMA_SCALARS: dict[str, dict[str, Any]] = {
    "VARCHAR": {"type": "string"},
    "INTEGER": {"type": "integer"},
    "BIGINT": {"type": "integer"},
    "DOUBLE": {"type": "number"},
    "BOOLEAN": {"type": "boolean"},
    "DATE": {"type": "string", "format": "date", "pattern": _DATE_PATTERN},
    # any object or array: what a JSON column is asked for (a bare scalar still parses)
    "JSON": {"type": ["object", "array"]},
}


def json_schema(spec: TypeSpec, labels: tuple[str, ...] = ()) -> dict[str, Any]:
    """A JSON schema that only admits values ``spec.parse`` accepts (grammars, structured outputs).

    With ``labels`` (a closed answer set) the schema is an enum of the labels' values; an ENUM
    type is one by itself.

    Example:
        >>> json_schema(parse_type("INTEGER[]"))
        {'type': 'array', 'items': {'type': 'integer'}}
    """
    if labels:
        kind = "string" if spec.labels else _SCHEMA_SCALARS.get(spec.sql, {}).get("type")
        return {"type": kind if isinstance(kind, str) else "string",
                "enum": [spec.parse(label) for label in labels]}  # fmt: skip
    if spec.labels:
        return {"type": "string", "enum": list(spec.labels)}
    if spec.kind == "list":
        ((_, child),) = spec.children
        return {"type": "array", "items": json_schema(child)}
    if spec.kind == "struct":
        return {
            "type": "object",
            "properties": {name: json_schema(child) for name, child in spec.children},
            "required": [name for name, _ in spec.children],
            "additionalProperties": False,
        }
    return dict(_SCHEMA_SCALARS[spec.sql])


def type_from_schema(schema: Any) -> str | None:
    """The SQL type a :func:`json_schema` stands for (what a server is asked to produce), or
    None for a schema no supported type makes."""
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
    enum = schema.get("enum")
    if kind == "string" and isinstance(enum, list) and len(set(map(str, enum))) >= 2:
        return "ENUM(" + ", ".join("'" + str(v).replace("'", "''") + "'" for v in enum) + ")"
    if kind == "string" and schema.get("format") == "date":
        return "DATE"
    if kind == ["object", "array"]:
        return "JSON"
    if kind == "array":
        item = type_from_schema(schema.get("items"))
        return None if item is None else f"{item}[]"
    if kind == "object":
        props = schema.get("properties")
        if not isinstance(props, dict) or not props:
            return None
        fields = [(str(name), type_from_schema(sub)) for name, sub in props.items()]
        if any(sql is None for _, sql in fields):
            return None
        return "STRUCT(" + ", ".join(f'"{name}" {sql}' for name, sql in fields) + ")"
    return {"string": "VARCHAR", "integer": "BIGINT", "number": "DOUBLE", "boolean": "BOOLEAN"}.get(
        str(kind)
    )
