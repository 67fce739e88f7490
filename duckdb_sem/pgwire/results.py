"""Results of one statement as the wire sends them: fields, encoded rows in order, a tag.

Rows are pulled from DuckDB as Arrow batches and encoded lazily, so a portal or a ``DECLARE``d
cursor hands out ``n`` rows at a time (``Execute`` with a row limit, ``FETCH 100``) without
materialising everything first.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from duckdb_sem.pgwire.catalog import column_name
from duckdb_sem.pgwire.copy_out import CopyFormat, encode_line
from duckdb_sem.pgwire.messages import Field, copy_data, data_row
from duckdb_sem.pgwire.types import PgType, pg_type_for

__all__ = ["Result"]


@dataclass(eq=False)
class Result:
    """One statement's outcome; ``fields`` is empty for commands."""

    tag_word: str
    fields: list[Field] = field(default_factory=list)
    types: list[PgType] = field(default_factory=list)
    batches: Iterator[pa.RecordBatch] | None = None
    formats: Sequence[int] = (0,)
    sent: int = 0
    fixed_tag: str | None = None
    #: rows go out as COPY ... TO STDOUT lines in this format instead of DataRows
    copy: CopyFormat | None = None
    #: NOTICE messages sent before the result (what the statement got differs from its words)
    notices: list[str] = field(default_factory=list)
    _pending: deque[bytes] = field(default_factory=deque)
    _done: bool = False

    @staticmethod
    def of_rows(tag_word: str, schema: pa.Schema, batches: Iterator[pa.RecordBatch]) -> Result:
        types = [pg_type_for(f.type) for f in schema]
        fields = [
            Field(column_name(f.name), t.oid, t.size) for f, t in zip(schema, types, strict=True)
        ]
        return Result(tag_word, fields, types, batches)

    @staticmethod
    def command(tag: str) -> Result:
        return Result(tag, fixed_tag=tag, _done=True)

    @property
    def has_rows(self) -> bool:
        return bool(self.fields)

    def described(self) -> list[Field]:
        return [
            Field(f.name, f.type_oid, f.type_size, f.type_mod, self._format(i))
            for i, f in enumerate(self.fields)
        ]

    def _format(self, index: int) -> int:
        if not self.formats:
            return 0
        return self.formats[index] if len(self.formats) > 1 else self.formats[0]

    def take(self, limit: int | None) -> tuple[list[bytes], bool]:
        """Up to ``limit`` encoded DataRows (all when None), and whether rows remain."""
        out: list[bytes] = []
        while limit is None or len(out) < limit:
            if not self._pending and not self._fill():
                break
            want = (
                len(self._pending) if limit is None else min(limit - len(out), len(self._pending))
            )
            for _ in range(want):
                out.append(self._pending.popleft())
        self.sent += len(out)
        more = bool(self._pending) or (not self._done and self._fill())
        return out, more

    def step(self, limit: int) -> list[bytes]:
        """Up to ``limit`` encoded DataRows, waiting for one batch at most: those pending, else
        the next batch's (``[]`` at the end). Streaming calls it, so rows leave as each batch
        is produced, not one batch late as a look-ahead for "more" would make them."""
        if not self._pending and not self._fill():
            return []
        out = [self._pending.popleft() for _ in range(min(limit, len(self._pending)))]
        self.sent += len(out)
        return out

    def more(self) -> bool:
        """Whether rows remain (reads the next batch when none is pending)."""
        return bool(self._pending) or (not self._done and self._fill())

    def preload(self, rows: list[bytes]) -> None:
        """Rows already encoded elsewhere (a FETCH from a cursor)."""
        self._pending.extend(rows)
        self._done = True

    def skip(self, limit: int | None) -> int:
        rows, _ = self.take(limit)
        return len(rows)

    def _fill(self) -> bool:
        if self._done or self.batches is None:
            return False
        for batch in self.batches:
            if batch.num_rows:
                self._pending.extend(self._encode(batch))
                return True
        self._done = True
        return False

    def _encode(self, batch: pa.RecordBatch) -> list[bytes]:
        if self.copy is not None:
            fmt = self.copy
            texts = [
                [None if v is None else t.text(v).decode("utf-8") for v in t.values(column)]
                for column, t in zip(batch.columns, self.types, strict=True)
            ]
            return [copy_data(encode_line(row, fmt)) for row in zip(*texts, strict=True)]
        columns: list[list[bytes | None]] = []
        for i, (column, pg_type) in enumerate(zip(batch.columns, self.types, strict=True)):
            encode = pg_type.binary if self._format(i) == 1 else pg_type.text
            columns.append([None if v is None else encode(v) for v in pg_type.values(column)])
        return [data_row(row) for row in zip(*columns, strict=True)]

    def tag(self, rows: int | None = None) -> str:
        """``SELECT 3``; ``rows``: those sent by the ``Execute`` that completes the portal,
        which PostgreSQL counts alone when the portal was suspended before (all rows else)."""
        if self.fixed_tag is not None:
            return self.fixed_tag
        return f"{self.tag_word} {self.sent if rows is None else rows}"
