"""The rows of a planned statement, read from Python, inside the statement's transaction.

The SEU loop runs its queries on the session's own connection between batches, so its rows
cannot be handed to DuckDB to scan on that same connection (a DuckDB scan may not call back
into the connection that runs it). A :class:`PlannedStream` is the statement's result
instead: an Arrow stream that runs an SEU whenever it needs rows, and ends the statement's
transaction (:mod:`.transaction`) when its last row is read, when it fails, or when it is
discarded: the next statement on the connection closes it first, as DuckDB discards a
result that was not read to the end.

Rows are turned into Python values by DuckDB itself (``from_arrow(batch).fetchall()``), so a
planned result has exactly the values and types DuckDB would give the same rows.

An error DuckDB meets while a result streams (a cast failing at row 150,000) reaches Python
through the Arrow stream as a bare ``OSError`` carrying DuckDB's message;
:func:`next_batch` and :func:`duckdb_errors` raise it as the ``duckdb.Error`` it was.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import duckdb
import pyarrow as pa

from duckdb_sem.errors import ResultClosedError
from duckdb_sem.identifiers import quote_identifier
from duckdb_sem.session.transaction import StatementTransaction

__all__ = ["PlannedStream", "duckdb_errors", "next_batch"]

#: DuckDB integer types Arrow exports as DECIMAL(38,0)
_WIDE = ("HUGEINT", "UHUGEINT")


def _plain(kind: pa.DataType) -> bool:
    """Arrow types whose Python values are DuckDB's own (no conversion query needed)."""
    return bool(
        pa.types.is_signed_integer(kind) or pa.types.is_boolean(kind)
        or pa.types.is_string(kind) or pa.types.is_large_string(kind)
        or pa.types.is_float64(kind)
    )  # fmt: skip


def next_batch(reader: pa.RecordBatchReader) -> pa.RecordBatch:
    """``reader.read_next_batch()`` (``StopIteration`` at the end), DuckDB's errors as DuckDB's."""
    try:
        return reader.read_next_batch()
    except OSError as err:
        raise _as_duckdb(err) from err


def duckdb_errors(reader: pa.RecordBatchReader) -> pa.RecordBatchReader:
    """``reader`` (of a DuckDB result), raising what fails mid-stream as a ``duckdb.Error``."""

    def batches() -> Iterator[pa.RecordBatch]:
        while True:
            try:
                batch = next_batch(reader)
            except StopIteration:
                return
            yield batch

    return pa.RecordBatchReader.from_batches(reader.schema, batches())


def _as_duckdb(err: OSError) -> duckdb.Error:
    """``Conversion Error: ...`` as ``duckdb.ConversionException`` (the prefix names the
    class DuckDB raises for it elsewhere); ``duckdb.Error`` when no class has that name."""
    message = str(err)
    kind, _, _ = message.partition(" Error: ")
    name = kind.title().replace(" ", "") + "Exception"
    cls = getattr(duckdb, name, None)
    if isinstance(cls, type) and issubclass(cls, duckdb.Error):
        return cls(message)
    return duckdb.Error(message)


class PlannedStream:
    """One planned statement's result stream; see the module docstring."""

    def __init__(
        self,
        reader: pa.RecordBatchReader,
        transaction: StatementTransaction,
        *,
        names: list[str] | None = None,
        types: list[str] | None = None,
        con: Any,
    ) -> None:
        schema = reader.schema
        if names is not None and len(names) == len(schema) and names != schema.names:
            schema = pa.schema([f.with_name(n) for f, n in zip(schema, names, strict=True)])
        self.schema = schema
        self._transaction = transaction
        self._con = con  # the session's DuckDB connection: values are converted by DuckDB
        #: DuckDB's types of the statement's columns (as bound; a semantic call's output is
        #: typed by its own result): a HUGEINT that Arrow carried as DECIMAL(38,0) is cast back
        self._types = types if types is not None and len(types) == len(schema) else None
        self._closed = False
        self._source = reader
        self._batches = self._guarded(reader)
        self._held = schema.empty_table()  # rows read from the stream, not yet returned
        self.reader = pa.RecordBatchReader.from_batches(schema, self._batches)

    @property
    def description(self) -> Any:
        """DB-API column descriptions, as DuckDB gives them for these columns."""
        return self._relation(self.schema.empty_table()).description

    def _guarded(self, reader: pa.RecordBatchReader) -> Iterator[pa.RecordBatch]:
        try:
            while True:
                if self._closed:
                    raise ResultClosedError(
                        "this result was closed when its connection ran another statement "
                        "(as DuckDB discards a result not read to the end); fetch it before "
                        "the next statement, or open a cursor() for each"
                    )
                try:
                    batch = next_batch(reader)
                except StopIteration:
                    break
                if batch.schema.names != self.schema.names:
                    batch = batch.rename_columns(self.schema.names)
                yield batch
        except BaseException as err:
            if not isinstance(err, GeneratorExit | ResultClosedError):
                self._transaction.fail(err)
            raise
        self._transaction.commit()

    def close(self) -> None:
        """Discard what is not read yet: no more LLM work is done for it, and the
        statement's transaction ends (it only read; a write statement has written already)."""
        if self._closed:
            return
        self._closed = True
        self._source.close()
        self._transaction.commit()

    # -- DB-API style ------------------------------------------------------------------------
    def _pull(self, size: int | None) -> pa.Table:
        """The next ``size`` rows (all left with None) as Arrow; SEUs run as needed."""
        while size is None or self._held.num_rows < size:
            try:
                batch = self.reader.read_next_batch()
            except StopIteration:
                break
            if batch.num_rows:
                more = pa.Table.from_batches([batch])
                self._held = pa.concat_tables([self._held, more]) if self._held.num_rows else more
        if size is None:
            out, self._held = self._held, self.schema.empty_table()
        else:
            out, self._held = self._held.slice(0, size), self._held.slice(size)
        return out

    def fetchmany(self, size: int | None) -> list[tuple[Any, ...]]:
        """The next ``size`` rows (every row left with None)."""
        table = self._pull(size)
        if not table.num_rows:
            return []
        if all(_plain(f.type) for f in table.schema):
            columns = [c.to_pylist() for c in table.columns]  # the values DuckDB would give
            return list(zip(*columns, strict=True))
        rows: list[tuple[Any, ...]] = self._relation(table).fetchall()
        return rows

    def _relation(self, table: pa.Table) -> Any:
        """``table`` as a DuckDB relation, with the integer types Arrow cannot carry (a
        ``HUGEINT`` arrives as ``DECIMAL(38,0)``) cast back to DuckDB's own."""
        rel = self._con.from_arrow(table)
        if self._types is None:
            return rel
        got = [str(t) for t in rel.types]
        lost = [g.startswith("DECIMAL(38") and want in _WIDE for g, want in zip(got, self._types,
                                                                             strict=True)]  # fmt: skip
        if not any(lost):
            return rel
        items = []
        for name, kind, cast in zip(table.schema.names, self._types, lost, strict=True):
            column = quote_identifier(name)
            items.append(f"CAST({column} AS {kind}) AS {column}" if cast else column)
        return rel.project(", ".join(items))

    def fetchone(self) -> tuple[Any, ...] | None:
        rows = self.fetchmany(1)
        return rows[0] if rows else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.fetchmany(None)

    def arrow(self) -> pa.Table:
        """The rows not read yet, as one Arrow table."""
        return self._pull(None)

    def relation(self) -> Any:
        """The rows not read yet, as a DuckDB relation with the statement's types."""
        return self._relation(self._pull(None))
