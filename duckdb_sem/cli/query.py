"""``duckdb-sem query "SQL"``: run one statement and print the result."""

from __future__ import annotations

import sys

import click
from rich.console import Console
from rich.table import Table

import duckdb_sem
from duckdb_sem.cli.common import connection_options
from duckdb_sem.cli.progress import run_with_progress
from duckdb_sem.errors import SemError

__all__ = ["query", "render_table"]


def render_table(table: object, *, title: str | None = None, max_rows: int = 50) -> Table:
    import pyarrow as pa

    assert isinstance(table, pa.Table)
    out = Table(title=title, show_lines=False)
    for name in table.column_names:
        out.add_column(name, overflow="fold", max_width=60)
    for row in table.slice(0, max_rows).to_pylist():
        out.add_row(*("NULL" if v is None else str(v) for v in row.values()))
    if table.num_rows > max_rows:
        out.caption = f"{table.num_rows} rows, first {max_rows} shown"
    return out


@click.command()
@click.argument("sql")
@click.option("--db", default=":memory:", show_default=True, help="DuckDB database file.")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table")
@click.option("--stats/--no-stats", default=True, help="Print LLM usage after the result.")
@click.option(
    "--show-prompts",
    is_flag=True,
    help="Print the plan and what each operator asks the model for its first row (EXPLAIN "
    "SEMANTIC VERBOSE) on stderr before running.",
)
@connection_options
def query(
    sql: str,
    db: str,
    fmt: str,
    stats: bool,
    show_prompts: bool,
    backend: str,
    cache: str | None,
    scheduler: str | None,
) -> None:
    """Run SQL (semantic or not) and print the result."""
    err = Console(stderr=True)
    try:
        con = duckdb_sem.connect(db, backend=backend, cache=cache, scheduler=scheduler)
        if show_prompts:
            err.print(con.explain_semantic(sql, verbose=True), markup=False, highlight=False)
        table = run_with_progress(con, sql, console=err)
    except SemError as exc:
        err.print(f"[red]error[/red] ({type(exc).__name__}): {exc}")
        sys.exit(1)
    except Exception as exc:  # noqa: BLE001 - DuckDB's own errors: the message, no traceback
        err.print(f"[red]error[/red]: {exc}")
        sys.exit(1)
    if fmt == "table":
        Console().print(render_table(table))
    elif fmt == "csv":
        import pyarrow.csv as pacsv

        pacsv.write_csv(table, sys.stdout.buffer)
    else:
        import json

        for row in table.to_pylist():
            click.echo(json.dumps(row, default=str))
    if stats:
        s = con.stats()
        err.print(
            f"LLM requests {s.llm_calls} (backend {s.physical_calls}, cache {s.cache_hits}, "
            f"in-query dedup {s.deduplicated}, fused {s.fused}); tokens "
            f"{s.prompt_tokens}+{s.completion_tokens} virtual, "
            f"{s.physical_prompt_tokens}+{s.physical_completion_tokens} physical"
        )
