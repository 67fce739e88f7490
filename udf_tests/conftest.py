"""Collects ``udf_tests/*.sql``: SQL-level cases with their expected results.

Format (blocks separated by blank lines; every directive is an SQL comment, so each file also
runs in any SQL client):

.. code-block:: sql

    -- backend: test:?yes_if=good          (file header; default test:)
    -- mode: connect                       (connect: {column} binding; install: plain DuckDB)

    -- statement
    CREATE TABLE t AS SELECT * FROM (VALUES (1, 'good')) v(id, text);

    -- query
    SELECT id, sem_filter('{text} ok') FROM t;
    -- expect
    -- 1 | true

    -- error: UnknownColumnError: unknown column
    SELECT sem_filter('{nope}') FROM t;

Expected rows are ``|``-separated; NULL, true/false, numbers and lists print as DuckDB's
Python values rendered by :func:`render`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest

import duckdb_sem


@dataclass(frozen=True)
class Block:
    kind: str  # statement | query | error
    sql: str
    expected: tuple[str, ...] = ()
    error: str = ""
    line: int = 0


def render(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(round(value, 6))
    return str(value)


def parse(text: str) -> tuple[dict[str, str], list[Block]]:
    header: dict[str, str] = {}
    blocks: list[Block] = []
    chunks: list[tuple[int, list[str]]] = []
    current: list[str] = []
    start = 1
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            if not current:
                start = number
            current.append(line)
        elif current:
            chunks.append((start, current))
            current = []
    if current:
        chunks.append((start, current))
    for start, lines in chunks:
        first = lines[0].strip()
        if first.startswith("-- backend:") or first.startswith("-- mode:"):
            for line in lines:
                key, _, value = line.strip()[3:].partition(":")
                header[key.strip()] = value.strip()
            continue
        if first == "-- statement" or first == "-- query":
            kind = first[3:]
            sql_lines, expected, in_expect = [], [], False
            for line in lines[1:]:
                if line.strip() == "-- expect":
                    in_expect = True
                elif in_expect:
                    expected.append(
                        line.strip()[3:] if line.strip().startswith("--") else line.strip()
                    )
                else:
                    sql_lines.append(line)
            blocks.append(Block(kind, "\n".join(sql_lines), tuple(expected), line=start))
        elif first.startswith("-- error:"):
            blocks.append(
                Block(
                    "error",
                    "\n".join(lines[1:]),
                    error=first[len("-- error:") :].strip(),
                    line=start,
                )
            )
        elif first.startswith("--"):
            continue  # a comment block
        else:
            raise ValueError(
                f"line {start}: a block must start with -- statement, -- query or -- error:"
            )
    return header, blocks


class SqlFile(pytest.File):
    def collect(self) -> Iterator[pytest.Item]:
        yield SqlCase.from_parent(self, name=self.path.stem)


class SqlCase(pytest.Item):
    def runtest(self) -> None:
        header, blocks = parse(self.path.read_text())
        backend = header.get("backend", "test:")
        mode = header.get("mode", "connect")
        con: Any
        if mode == "install":
            con = duckdb.connect()
            duckdb_sem.install(con, backend=backend, cache="off")
        else:
            con = duckdb_sem.connect(backend=backend, cache="off")
        for block in blocks:
            where = f"{self.path.name}:{block.line}"
            if block.kind == "statement":
                con.execute(block.sql)
            elif block.kind == "query":
                rows = con.execute(block.sql).fetchall()
                got = tuple(" | ".join(render(v) for v in row) for row in rows)
                assert got == block.expected, (
                    f"{where}: expected {list(block.expected)}, got {list(got)}"
                )
            else:
                kind, _, message = block.error.partition(":")
                try:
                    con.execute(block.sql).fetchall()
                except Exception as err:  # noqa: BLE001 - compared below
                    assert type(err).__name__ == kind.strip() or kind.strip() in str(err), (
                        f"{where}: expected {kind.strip()}, got {type(err).__name__}: {err}"
                    )
                    assert message.strip() in str(err), f"{where}: {message.strip()!r} not in {err}"
                else:
                    raise AssertionError(f"{where}: expected an error {block.error!r}, got none")

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"udf case {self.name}"


def pytest_collect_file(parent: pytest.Collector, file_path: Path) -> SqlFile | None:
    if file_path.suffix == ".sql" and file_path.parent.name == "udf_tests":
        return SqlFile.from_parent(parent, path=file_path)
    return None
