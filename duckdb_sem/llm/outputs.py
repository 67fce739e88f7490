"""Typed outputs: which SQL types ``sem_map`` can return, how to ask for them, how to parse them.

Supported: ``VARCHAR``, ``INTEGER``, ``BIGINT``, ``DOUBLE``, ``BOOLEAN``, lists of those
(``VARCHAR[]``) and ``STRUCT(name TYPE, ...)`` of those. Everything else is an
:class:`~duckdb_sem.errors.OutputTypeError` at bind time, before any LLM call.

Example:
    >>> spec = parse_type("STRUCT(year INTEGER, tags VARCHAR[])")
    >>> spec.parse('{"year": 1999, "tags": ["a", "b"]}')
    {'year': 1999, 'tags': ['a', 'b']}
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import sqlglot
from sqlglot import exp

from duckdb_sem.errors import OutputTypeError

__all__ = [
    "SUPPORTED_TYPES",
    "OutputParseError",
    "TypeSpec",
    "json_schema",
    "parse_type",
    "type_from_schema",
]

SUPPORTED_TYPES = (
    "VARCHAR",
    "INTEGER",
    "BIGINT",
    "DOUBLE",
    "BOOLEAN",
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
}

_TRUE = {"true", "yes", "y", "1", "t"}
_FALSE = {"false", "no", "n", "0", "f"}
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


class OutputParseError(ValueError):
    """Model output that does not parse into the requested type (retried, then NULL)."""


@dataclass(frozen=True, slots=True)
class TypeSpec:
    """A validated output type: its canonical SQL, Arrow type and parser."""

    sql: str
    arrow: pa.DataType
    kind: str  # "scalar", "list" or "struct"
    children: tuple[tuple[str, TypeSpec], ...] = ()

    @property
    def is_text(self) -> bool:
        return self.sql == "VARCHAR"

    def format_hint(self) -> str:
        """What to tell the model about the expected answer format."""
        if self.kind == "scalar":
            return {
                "VARCHAR": "Answer with the text only.",
                "INTEGER": "Answer with a single integer only.",
                "BIGINT": "Answer with a single integer only.",
                "DOUBLE": "Answer with a single number only.",
                "BOOLEAN": "Answer with yes or no only.",
            }[self.sql]
        if self.kind == "list":
            return 'Answer with a JSON array only, for example ["a", "b"].'
        fields = ", ".join(f'"{name}": <{child.sql}>' for name, child in self.children)
        return "Answer with a JSON object only: {" + fields + "}."

    def parse(self, text: str) -> Any:
        """Parse raw model output; raise :class:`OutputParseError` when it does not fit."""
        if self.kind == "scalar":
            return _parse_scalar(self.sql, text)
        data = _load_json(text, "[" if self.kind == "list" else "{")
        return self.coerce(data)

    def coerce(self, data: Any) -> Any:
        """Validate an already decoded JSON value against this type."""
        if data is None:
            return None
        if self.kind == "scalar":
            if self.sql == "VARCHAR":
                return data if isinstance(data, str) else json.dumps(data)
            return _parse_scalar(self.sql, str(data))
        if self.kind == "list":
            if not isinstance(data, list):
                raise OutputParseError(f"expected a JSON array, got {type(data).__name__}")
            ((_, child),) = self.children
            return [child.coerce(item) for item in data]
        if not isinstance(data, dict):
            raise OutputParseError(f"expected a JSON object, got {type(data).__name__}")
        lowered = {str(k).lower(): v for k, v in data.items()}
        return {name: child.coerce(lowered.get(name.lower())) for name, child in self.children}


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


def _parse_scalar(sql: str, text: str) -> Any:
    cleaned = text.strip().strip("`").strip()
    if sql == "VARCHAR":
        return cleaned
    if sql == "BOOLEAN":
        word = re.sub(r"[^a-z0-9]", "", cleaned.lower().split()[0]) if cleaned.split() else ""
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
        raise OutputParseError(f"expected yes/no or true/false, got {text[:60]!r}")
    match = _NUMBER.search(cleaned.replace(",", ""))
    if match is None:
        raise OutputParseError(f"expected a number, got {text[:60]!r}")
    number = float(match.group())
    if sql == "DOUBLE":
        return number
    if number != int(number):
        raise OutputParseError(f"expected an integer, got {match.group()!r}")
    value = int(number)
    if sql == "INTEGER" and not -(2**31) <= value < 2**31:
        raise OutputParseError(f"integer {value} out of INTEGER range")
    return value


def _load_json(text: str, opener: str) -> Any:
    closer = "]" if opener == "[" else "}"
    start, end = text.find(opener), text.rfind(closer)
    if start < 0 or end <= start:
        raise OutputParseError(f"expected JSON starting with {opener!r}, got {text[:60]!r}")
    try:
        return json.loads(text[start : end + 1])
    except json.JSONDecodeError as err:
        raise OutputParseError(f"invalid JSON ({err.msg}) in {text[:60]!r}") from None


_SCHEMA_SCALARS = {
    "VARCHAR": "string",
    "INTEGER": "integer",
    "BIGINT": "integer",
    "DOUBLE": "number",
    "BOOLEAN": "boolean",
}


def json_schema(spec: TypeSpec, labels: tuple[str, ...] = ()) -> dict[str, Any]:
    """A JSON schema that only admits values ``spec.parse`` accepts (grammars, structured outputs).

    With ``labels`` (a closed answer set) the schema is an enum of the labels' values.

    Example:
        >>> json_schema(parse_type("INTEGER[]"))
        {'type': 'array', 'items': {'type': 'integer'}}
    """
    if labels:
        return {"type": _SCHEMA_SCALARS.get(spec.sql, "string"),
                "enum": [spec.parse(label) for label in labels]}  # fmt: skip
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
    return {"type": _SCHEMA_SCALARS[spec.sql]}


def type_from_schema(schema: Any) -> str | None:
    """The SQL type a :func:`json_schema` stands for (what a server is asked to produce), or
    None for a schema no supported type makes."""
    if not isinstance(schema, dict):
        return None
    kind = schema.get("type")
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
