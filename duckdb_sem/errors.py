"""The one error tree of duckdb-sem.

Every error the package raises on purpose derives from :class:`SemError`, and every message says
what was wrong and how to fix it. SQLSTATE codes are attached here once and used only at the
Postgres boundary (the wire server).

``SemError`` is a ``duckdb.Error``, and a branch that has a DuckDB twin is that ``duckdb``
exception too (in brackets below), so code written for ``duckdb.connect()`` (``except
duckdb.Error``, ``except duckdb.BinderException``) catches what ``duckdb_sem.connect()`` raises.

::

    SemError [duckdb.Error]
    ├── ConfigError                 bad setting, environment variable or backend spec
    │                               [duckdb.InvalidInputException]
    ├── BindError                   semantic SQL that cannot run (before any LLM call)
    │                               [duckdb.BinderException]
    │   ├── TemplateError           empty template, unbalanced braces, bad placeholder
    │   ├── UnknownColumnError      {col} names no column in scope
    │   ├── AmbiguousColumnError    {col} matches columns of several tables
    │   ├── OutputTypeError         sem_map type string that is not supported
    │   └── UnknownModelError       model := names no model registered on the connection
    ├── PlanError                   the optimizer cannot plan this query shape
    │                               [duckdb.NotImplementedException]
    ├── CatalogChangedError         a source's tables changed under a transaction that listed them
    │                               [duckdb.TransactionException]
    ├── BackendError                an LLM backend failed [duckdb.IOException]
    │   ├── BackendUnavailableError cannot reach or load the backend
    │   ├── BackendTimeoutError     the backend did not answer in time
    │   └── ModelOutputError        output could not be parsed after all retries
    ├── SchedulerError              the scheduler (in process or sidecar) failed
    │                               [duckdb.IOException]
    │   └── SidecarError            cannot reach the sidecar, or it died mid-query
    │       ├── SidecarAuthError    a TCP sidecar refused the request: no token, or a wrong one
    │       └── UnsafePathError     a sidecar's folder, socket or log is not this user's own
    ├── QueryCancelledError         the query was cancelled (interrupt, Ctrl-C, wire cancel)
    │                               [duckdb.InterruptException]
    ├── BudgetExceededError         the query would pass its max_llm_calls / max_prompt_tokens
    ├── ResultClosedError           a result read after its connection ran another statement
    │                               [duckdb.InvalidInputException]
    └── WireError                   a wire-server client asked for what the server refuses
        ├── RefusedError            would change what other sessions see (ATTACH, DETACH...)
        ├── ReadOnlyError           a write on a --read-only server
        ├── UndefinedNameError      no such portal (34000) or prepared statement (26000)
        ├── TransactionStateError   savepoint outside a transaction, unknown savepoint
        ├── ParameterError          a bound parameter that is not a value of its declared type
        ├── MalformedMessageError   a message whose contents do not fit its length (08P01)
        └── UnsendableValueError    a result value no PostgreSQL type's format can carry
"""

from __future__ import annotations

import duckdb

__all__ = [
    "AmbiguousColumnError",
    "BackendError",
    "BackendTimeoutError",
    "BackendUnavailableError",
    "BindError",
    "BudgetExceededError",
    "CatalogChangedError",
    "ConfigError",
    "MalformedMessageError",
    "ModelOutputError",
    "OutputTypeError",
    "ParameterError",
    "PlanError",
    "QueryCancelledError",
    "ReadOnlyError",
    "RefusedError",
    "ResultClosedError",
    "SchedulerError",
    "SemError",
    "SidecarAuthError",
    "SidecarError",
    "TemplateError",
    "TransactionStateError",
    "UndefinedNameError",
    "UnknownColumnError",
    "UnknownModelError",
    "UnsafePathError",
    "UnsendableValueError",
    "WireError",
]


class SemError(duckdb.Error):
    """Base of every error duckdb-sem raises on purpose."""

    sqlstate: str = "XX000"  # internal_error


class ConfigError(SemError, duckdb.InvalidInputException):
    sqlstate = "22023"  # invalid_parameter_value


class BindError(SemError, duckdb.BinderException):
    sqlstate = "42000"  # syntax_error_or_access_rule_violation


class TemplateError(BindError):
    sqlstate = "42601"  # syntax_error


class UnknownColumnError(BindError):
    sqlstate = "42703"  # undefined_column


class AmbiguousColumnError(BindError):
    sqlstate = "42702"  # ambiguous_column


class OutputTypeError(BindError):
    sqlstate = "42704"  # undefined_object


class UnknownModelError(BindError):
    sqlstate = "42704"  # undefined_object


class PlanError(SemError, duckdb.NotImplementedException):
    sqlstate = "0A000"  # feature_not_supported


class CatalogChangedError(SemError, duckdb.TransactionException):
    """A PostgreSQL source's catalog was attached again (its tables changed) after this
    transaction listed it; the transaction cannot list it again (retry the transaction)."""

    sqlstate = "40001"  # serialization_failure: clients retry


class BackendError(SemError, duckdb.IOException):
    sqlstate = "58000"  # system_error


class BackendUnavailableError(BackendError):
    sqlstate = "08001"  # sqlclient_unable_to_establish_sqlconnection


class BackendTimeoutError(BackendError):
    sqlstate = "57014"  # query_canceled (statement timeout)


class ModelOutputError(BackendError):
    sqlstate = "22000"  # data_exception


class SchedulerError(SemError, duckdb.IOException):
    sqlstate = "58000"


class SidecarError(SchedulerError):
    sqlstate = "08006"  # connection_failure


class SidecarAuthError(SidecarError):
    """A sidecar answered 401: the request carried no token, or not one the sidecar holds."""

    sqlstate = "28000"  # invalid_authorization_specification


class UnsafePathError(SidecarError):
    """A path a sidecar would use is not one this user made: a folder of another owner or wider
    mode than 0700, a symlink, or something other than a socket (a log: a file) at the path."""

    sqlstate = "42501"  # insufficient_privilege


class QueryCancelledError(SemError, duckdb.InterruptException):
    sqlstate = "57014"  # query_canceled


class BudgetExceededError(SemError):
    sqlstate = "54000"  # program_limit_exceeded


class ResultClosedError(SemError, duckdb.InvalidInputException):
    sqlstate = "24000"  # invalid_cursor_state


class WireError(SemError):
    sqlstate = "42000"  # syntax_error_or_access_rule_violation


class RefusedError(WireError):
    sqlstate = "42501"  # insufficient_privilege


class ReadOnlyError(WireError):
    sqlstate = "25006"  # read_only_sql_transaction


class TransactionStateError(WireError):
    """Set ``sqlstate`` per instance: 25P01 (no transaction) or 3B001 (no such savepoint)."""

    def __init__(self, message: str, *, sqlstate: str = "25P01") -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


class UndefinedNameError(WireError):
    """A portal or prepared statement that does not exist (or no longer: a portal ends with its
    transaction, as in PostgreSQL): 34000 (portal) or 26000 (prepared statement)."""

    def __init__(self, message: str, *, sqlstate: str = "34000") -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


class ParameterError(WireError):
    """Set ``sqlstate`` per instance: 22P02 (bad text), 22P03 (bad binary), 22021 (not UTF-8)."""

    def __init__(self, message: str, *, sqlstate: str = "22P02") -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


class MalformedMessageError(WireError):
    """An ERROR, not FATAL, as PostgreSQL's ``pq_getmsg*``: the session skips to the next Sync."""

    sqlstate = "08P01"  # protocol_violation


class UnsendableValueError(WireError):
    """A result value outside what the column's PostgreSQL type holds (a ragged list of lists
    as a binary array, a date past PostgreSQL's range in binary)."""

    sqlstate = "22000"  # data_exception
