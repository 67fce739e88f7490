"""``duckdb-sem query``: run SQL (one statement or several) and print each result in order.

SQL comes from the argument, from ``-f FILE`` or from stdin (``-`` as the argument, or piped
with no argument); statements are split at top-level semicolons (``cli/statements.py``) and run
one after another on one connection, each result printed as it finishes. The first error stops
the run (exit status 1) after the results before it have been printed. Results stay apart in
every format: ``csv`` puts a blank line and the next result's own header between them, ``json``
writes one JSON document (an array of row objects) per statement, one a line; an EXPLAIN prints
as text.

Example::

    duckdb-sem query -f report.sql --format csv > report.csv
    echo "SELECT 1; SELECT 2" | duckdb-sem query --backend test:
"""

from __future__ import annotations

import sys
from typing import NoReturn

import click
from rich.console import Console

import duckdb_sem
from duckdb_sem.cli.common import connection_options, env_epilog
from duckdb_sem.cli.formats import FORMATS, explain_text, render_table, write_result
from duckdb_sem.cli.progress import run_with_progress
from duckdb_sem.cli.statements import reads_rows, split_statements
from duckdb_sem.errors import SemError
from duckdb_sem.session.connection import SemConnection

__all__ = ["explain_text", "query", "render_table"]


def _read_sql(sql: str | None, file: click.File | None) -> str:
    if file is not None:
        if sql is not None:
            raise click.UsageError("give the SQL as an argument or with -f FILE, not both")
        text: str = file.read()  # type: ignore[attr-defined]
        return text
    if sql == "-" or (sql is None and not sys.stdin.isatty()):
        return sys.stdin.read()
    if sql is None:
        raise click.UsageError(
            "no SQL: pass it as an argument, with -f FILE, or on stdin ('-' or a pipe)"
        )
    return sql


@click.command(epilog=env_epilog())
@click.argument("sql", required=False)
@click.option(
    "-f",
    "--file",
    "file",
    type=click.File("r", encoding="utf-8"),
    default=None,
    help="Read the SQL from FILE ('-' for stdin); several statements separated by ';'.",
)
@click.option("--db", default=":memory:", show_default=True, help="DuckDB database file.")
@click.option(
    "--demo",
    is_flag=True,
    help="First create the bundled demo tables reviews and plots (duckdb_sem.load_demo).",
)
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="table", show_default=True)
@click.option("--stats/--no-stats", default=True, help="Print LLM usage after each result.")
@click.option(
    "--show-prompts",
    is_flag=True,
    help="Print the plan and what each operator asks the model for its first row (EXPLAIN "
    "SEMANTIC VERBOSE) on stderr before running.",
)
@click.option(
    "--progress-every",
    type=click.FloatRange(0.1),
    default=5.0,
    show_default=True,
    help="Seconds between progress lines when stderr is not a terminal.",
)
@click.option("--no-progress", is_flag=True, help="No progress line on stderr.")
@connection_options
def query(
    sql: str | None,
    file: click.File | None,
    db: str,
    demo: bool,
    fmt: str,
    stats: bool,
    show_prompts: bool,
    progress_every: float,
    no_progress: bool,
    backend: str,
    cache: str | None,
    scheduler: str | None,
) -> None:
    """Run SQL (semantic or not) and print each statement's result.

    SQL is the argument, -f FILE, or stdin ('-' or piped); statements separated by ';' run in
    order on one connection.
    """
    err = Console(stderr=True)
    statements = split_statements(_read_sql(sql, file))
    if not statements:
        raise click.UsageError("the SQL holds no statement")
    try:
        con = duckdb_sem.connect(db, backend=backend, cache=cache, scheduler=scheduler)
    except SemError as exc:
        _fail(err, exc)
    try:  # closed however it ends: a share left open keeps its model's scheduler in the process
        if demo:
            duckdb_sem.load_demo(con)
        _run_statements(con, statements, err, fmt, show_prompts, no_progress, progress_every, stats)
    except SemError as exc:
        _fail(err, exc)
    finally:
        con.close()


def _run_statements(
    con: SemConnection,
    statements: list[str],
    err: Console,
    fmt: str,
    show_prompts: bool,
    no_progress: bool,
    progress_every: float,
    stats: bool,
) -> None:
    shown = 0
    for statement in statements:
        try:
            if show_prompts and reads_rows(statement) and not _is_explain(statement):
                err.print(
                    con.explain_semantic(statement, verbose=True), markup=False, highlight=False
                )
            table = run_with_progress(
                con, statement, console=err, quiet=no_progress, every=progress_every
            )
        except Exception as exc:  # noqa: BLE001 - DuckDB's errors too: the message, no traceback
            _fail(err, exc, statement if len(statements) > 1 else None)
        if table.num_rows or reads_rows(statement):  # DDL, DML, SET: a status, not shown
            shown += _print(table, fmt, separate=shown > 0, explain=_is_explain(statement))
        if stats and (len(statements) == 1 or con.stats().llm_calls):
            _print_stats(err, con)


def _is_explain(statement: str) -> bool:
    return statement.lstrip().upper().startswith("EXPLAIN")


def _fail(err: Console, exc: BaseException, statement: str | None = None) -> NoReturn:
    kind = f" ({type(exc).__name__})" if isinstance(exc, SemError) else ""
    where = f" in: {statement[:60]}" if statement else ""
    err.print(f"[red]error[/red]{kind}{where}", highlight=False, soft_wrap=True)
    err.print(str(exc), markup=False, highlight=False, soft_wrap=True)
    sys.exit(1)


def _print(table: object, fmt: str, *, separate: bool, explain: bool = False) -> int:
    """Print one result (a blank line before it when ``separate``, in CSV); 1 if printed.

    In ``table`` format an EXPLAIN prints as the text it is (a plan drawn inside a table box
    is unreadable); in ``csv`` and ``json`` it stays a result like any other.
    """
    import pyarrow as pa

    assert isinstance(table, pa.Table)
    if fmt == "table" and explain:
        sys.stdout.write(explain_text(table) + "\n")
        sys.stdout.flush()
        return 1
    if fmt == "table":
        Console().print(render_table(table))
        return 1
    sys.stdout.flush()  # text printed before goes out first
    out = sys.stdout.buffer
    if separate and fmt == "csv":
        out.write(b"\n")  # one CSV table after another, as DuckDB's shell separates them
    write_result(table, fmt, out)
    return 1


def _print_stats(err: Console, con: SemConnection) -> None:
    s = con.stats()
    err.print(
        f"LLM requests {s.llm_calls} (backend {s.physical_calls}, cache {s.cache_hits}, "
        f"in-query dedup {s.deduplicated}, fused {s.fused}); tokens "
        f"{s.prompt_tokens}+{s.completion_tokens} virtual, "
        f"{s.physical_prompt_tokens}+{s.physical_completion_tokens} physical",
        highlight=False,
        soft_wrap=True,
    )
