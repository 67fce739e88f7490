"""The SQL pieces every ``install(con)`` macro shares: how a macro passes its columns, its
column count and its named arguments to the UDF behind it.

A macro's column parameters ``a0`` ... ``a7`` default to NULL; :data:`GIVEN` counts those given
(read from ``typeof`` at bind time, so a column that is NULL still counts). Every macro takes
the named arguments of :data:`OPTION_PARAMS` and passes them on as :data:`OPTION_ARGS`, the
UDF's last arguments, typed :data:`OPTION_TYPES`.

Example:
    ``sem_filter('{0} is spam', body)`` is the macro
    ``__semudf_filter_s1('{0} is spam', [body::VARCHAR, NULL::VARCHAR, ...], 1, NULL, ...)``
"""

from __future__ import annotations

from duckdb_sem.llm.outputs import TypeSpec
from duckdb_sem.surface.bind import typed_map_function

__all__ = [
    "GIVEN",
    "MAX_COLUMNS",
    "OPTION_ARGS",
    "OPTION_NULLS",
    "OPTION_PARAMS",
    "OPTION_TYPES",
    "explicit_macro",
    "typed_udf",
]

#: explicit-form overloads are registered for up to this many column arguments
MAX_COLUMNS = 8
#: the named arguments every macro takes, with their defaults, and the UDF's argument types
OPTION_PARAMS = (
    "model := NULL, temperature := NULL, max_tokens := NULL, choices := NULL, per_row := NULL, "
    "per_row_match := NULL, examples := NULL, batch_size := NULL"
)
# choices and examples (lists) reach the UDF as JSON text: one hashable constant per query
OPTION_ARGS = (
    "model, temperature, max_tokens, CAST(to_json(choices) AS VARCHAR), per_row, per_row_match, "
    "CAST(to_json(examples) AS VARCHAR), batch_size"
)
OPTION_TYPES = ["VARCHAR", "DOUBLE", "BIGINT", "VARCHAR", "VARCHAR", "VARCHAR", "VARCHAR",
                "BIGINT"]  # fmt: skip
#: the option arguments of a call that names none
OPTION_NULLS = ", ".join(["NULL"] * len(OPTION_TYPES))
#: the number of column arguments a macro call was given (typeof is constant, folded at bind)
GIVEN = (
    "CASE "
    + " ".join(
        f"WHEN typeof(a{i}) <> '\"NULL\"' THEN {i + 1}" for i in reversed(range(MAX_COLUMNS))
    )
    + " ELSE 0 END"
)


def typed_udf(spec: TypeSpec) -> str:
    """The UDF behind the typed map ``spec`` (before the session suffix)."""
    return f"__semudf{typed_map_function(spec)[len('__sem') :]}"


def explicit_macro(target: str, wrap: str, *, labels: bool = False) -> tuple[str, str]:
    """(parameters, body) of the macro that calls UDF ``target`` with the explicit form's
    arguments; ``wrap`` puts the column list in one (``[{}]``, or ``list([{}])`` for
    ``sem_agg``); ``labels``: ``sem_classify``'s labels come second."""
    lead = ["t", "l"] if labels else ["t"]
    params = ", ".join([*lead, *(f"a{i} := NULL" for i in range(MAX_COLUMNS)), OPTION_PARAMS])
    listed = wrap.format(", ".join(f"a{i}::VARCHAR" for i in range(MAX_COLUMNS)))
    # in an aggregate the column count is read inside one too (the binder wants it so)
    given = GIVEN if wrap == "[{}]" else f"any_value({GIVEN})"
    return params, f"{target}({', '.join(lead)}, {listed}, {given}, {OPTION_ARGS})"
