"""The SQL that registers, drops and lists named models (read before DuckDB sees a statement).

===================================================  =========================================
statement                                            does
===================================================  =========================================
``CREATE [OR REPLACE] MODEL [IF NOT EXISTS] name      registers ``name`` (its backend is built
USING 'spec'``                                       now, so a bad spec fails here)
``DROP MODEL [IF EXISTS] name``                      forgets it
``SHOW MODELS``                                      one row per model: name, spec, backend_id
===================================================  =========================================

``spec`` is a backend spec string (docs/backends.md). ``SHOW MODELS`` is read as this
statement, not DuckDB's ``SHOW models`` (a table's columns): write ``DESCRIBE models`` for that.

Example:
    >>> parse_model_statement("CREATE MODEL fast USING 'test:?yes_if=good'")
    ModelStatement(verb='create', name='fast', spec='test:?yes_if=good', replace=False, if_exists=False)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from duckdb_sem.errors import BindError

__all__ = ["ModelStatement", "parse_model_statement"]

_NAME = r'(?P<name>"(?:[^"]|"")+"|\w+)'
_CREATE = re.compile(
    r"^\s*CREATE\s+(?P<replace>OR\s+REPLACE\s+)?MODEL\s+(?P<ine>IF\s+NOT\s+EXISTS\s+)?"
    rf"{_NAME}\s+USING\s+'(?P<spec>(?:[^']|'')*)'\s*;?\s*$",
    re.IGNORECASE | re.DOTALL,
)
_DROP = re.compile(
    rf"^\s*DROP\s+MODEL\s+(?P<ie>IF\s+EXISTS\s+)?{_NAME}\s*;?\s*$", re.IGNORECASE | re.DOTALL
)
_SHOW = re.compile(r"^\s*SHOW\s+MODELS\s*;?\s*$", re.IGNORECASE)
_START = re.compile(r"^\s*(?:CREATE\s+(?:OR\s+REPLACE\s+)?|DROP\s+)MODEL\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ModelStatement:
    verb: str  # create, drop, show
    name: str = ""
    spec: str = ""
    replace: bool = False
    if_exists: bool = False  # DROP ... IF EXISTS; CREATE ... IF NOT EXISTS

    @property
    def tag(self) -> str:
        """The command tag a Postgres client sees."""
        return {"create": "CREATE MODEL", "drop": "DROP MODEL", "show": "SHOW"}[self.verb]


def _name(raw: str) -> str:
    return raw[1:-1].replace('""', '"') if raw.startswith('"') else raw


def parse_model_statement(sql: str) -> ModelStatement | None:
    """The model statement ``sql`` is, or None; a malformed one is a :class:`BindError`."""
    if _SHOW.match(sql):
        return ModelStatement("show")
    if (m := _CREATE.match(sql)) is not None:
        return ModelStatement("create", _name(m["name"]), m["spec"].replace("''", "'"),
                              replace=bool(m["replace"]), if_exists=bool(m["ine"]))  # fmt: skip
    if (m := _DROP.match(sql)) is not None:
        return ModelStatement("drop", _name(m["name"]), if_exists=bool(m["ie"]))
    if _START.match(sql):
        raise BindError(
            "cannot read this model statement; write CREATE [OR REPLACE] MODEL name USING "
            "'backend spec' (e.g. CREATE MODEL fast USING 'llama:') or DROP MODEL [IF EXISTS] name"
        )
    return None
