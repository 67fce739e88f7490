"""SQLSTATE codes for errors sent back as ErrorResponse (the only place they are mapped).

duckdb-sem errors carry their own ``sqlstate``; DuckDB's exceptions are mapped by class and,
where one class covers several PostgreSQL conditions, by message.
"""

from __future__ import annotations

import duckdb

from duckdb_sem.errors import SemError

__all__ = ["describe_error"]

_BY_CLASS: tuple[tuple[type[BaseException], str], ...] = (
    (duckdb.ParserException, "42601"),  # syntax_error
    (duckdb.PermissionException, "42501"),  # insufficient_privilege
    (duckdb.InterruptException, "57014"),  # query_canceled
    (duckdb.ConversionException, "22P02"),  # invalid_text_representation
    (duckdb.OutOfRangeException, "22003"),  # numeric_value_out_of_range
    (duckdb.NotImplementedException, "0A000"),  # feature_not_supported
    (duckdb.TransactionException, "25000"),  # invalid_transaction_state
    (duckdb.ConstraintException, "23000"),  # integrity_constraint_violation
    (duckdb.TypeMismatchException, "42804"),  # datatype_mismatch
    (duckdb.InvalidTypeException, "42804"),
    (duckdb.BinderException, "42P18"),  # indeterminate_datatype (refined below)
    (duckdb.CatalogException, "42704"),  # undefined_object (refined below)
    (duckdb.InvalidInputException, "22023"),  # invalid_parameter_value
    (duckdb.IOException, "58030"),  # io_error
)

# (substring of the lower-cased message, sqlstate), checked first
_BY_MESSAGE: tuple[tuple[str, str], ...] = (
    ("no space left on device", "53100"),  # disk_full
    ("disk is full", "53100"),
    ("unrecognized configuration parameter", "42704"),  # undefined_object (current_setting)
    ('relation "', "42P01"),  # undefined_table ('x'::regclass)
    ("read-only mode", "25006"),  # read_only_sql_transaction
    ("attached in read-only", "25006"),
    ("file system operations are disabled", "42501"),
    ("configuration has been locked", "42501"),
    ("current transaction is aborted", "25P02"),
    ("table with name", "42P01"),  # undefined_table
    ("table function with name", "42883"),
    ("referenced column", "42703"),  # undefined_column
    ("column with name", "42703"),
    ("scalar function with name", "42883"),  # undefined_function
    ("no function matches", "42883"),
    ("schema with name", "3F000"),  # invalid_schema_name
    ("division by zero", "22012"),
    ("duplicate key", "23505"),
    ("not null constraint", "23502"),
    ("interrupted", "57014"),
    # a PostgreSQL source's catalog was attached again (its tables changed) after this
    # transaction listed it: serialization_failure, so the client retries the transaction
    ("was already used by a different database in this transaction", "40001"),
)


# "<Kind> with name x already exists!": the duplicate_* code of that kind, checked first
_DUPLICATES: tuple[tuple[str, str], ...] = (
    ("schema with name", "42P06"),  # duplicate_schema
    ("function with name", "42723"),  # duplicate_function (DuckDB's macros too)
    ("type with name", "42710"),  # duplicate_object
    ("", "42P07"),  # duplicate_table: tables, views, indexes, sequences (all relations)
)


def _duplicate(lowered: str) -> str | None:
    if "already exists" not in lowered:
        return None
    return next(code for needle, code in _DUPLICATES if needle in lowered)


def describe_error(err: BaseException) -> tuple[str, str]:
    """(SQLSTATE, message) for an error raised while running a statement."""
    message = str(err) or type(err).__name__
    if isinstance(err, SemError):
        return err.sqlstate, message
    if isinstance(err, duckdb.Error):
        lowered = message.lower()
        if (duplicate := _duplicate(lowered)) is not None:
            return duplicate, message
        if isinstance(err, duckdb.TransactionException) and "conflict" in lowered:
            # "Conflict on update!", "write-write conflict": serialization_failure, retryable
            return "40001", message
        for needle, code in _BY_MESSAGE:
            if needle in lowered:
                return code, message
        for cls, code in _BY_CLASS:
            if isinstance(err, cls):
                return code, message
        return "XX000", message
    return "XX000", f"internal error: {type(err).__name__}: {message}"
