"""``duckdb-sem demo``: the example queries on bundled labelled data, with accuracy."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console
from rich.syntax import Syntax

import duckdb_sem
from duckdb_sem.cli.common import connection_options
from duckdb_sem.cli.query import render_table
from duckdb_sem.data import demo_path
from duckdb_sem.demo import example_queries, run_demo
from duckdb_sem.errors import SemError

__all__ = ["demo"]


@click.command()
@click.option(
    "--sql-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Folder of example .sql files [default: the checkout's sql/].",
)
@click.option("--only", multiple=True, help="Run only examples whose name contains this.")
@click.option(
    "--path",
    "show_path",
    is_flag=True,
    help="Print the folder of the bundled data (rt_reviews.csv, rt_plots.csv) and exit.",
)
@connection_options
def demo(
    sql_dir: Path | None,
    only: tuple[str, ...],
    show_path: bool,
    backend: str,
    cache: str | None,
    scheduler: str | None,
) -> None:
    """Run the example queries in sql/ over bundled Rotten Tomatoes reviews and plots."""
    if show_path:
        click.echo(demo_path("reviews").parent)
        return
    out, err = Console(), Console(stderr=True)
    try:
        queries = [q for q in example_queries(sql_dir) if not only or any(o in q[0] for o in only)]
        con = duckdb_sem.connect(backend=backend, cache=cache, scheduler=scheduler)
    except SemError as exc:
        err.print(f"[red]error[/red] ({type(exc).__name__}): {exc}")
        sys.exit(1)
    try:  # closed however it ends: a share left open keeps its model's scheduler in the process
        err.print(f"backend: {con.session.engine.client.backend_id}")
        for result in run_demo(con, queries):
            out.rule(f"[bold]{result.name}[/bold]")
            out.print(Syntax(result.sql.strip(), "sql", word_wrap=True))
            out.print(render_table(result.table, max_rows=12))
            s = result.stats
            line = (
                f"{result.seconds:.1f} s; LLM requests {s.llm_calls} "
                f"(backend {s.physical_calls}, cache {s.cache_hits})"
            )
            if result.score is not None:
                sc = result.score
                prec = "n/a" if sc.precision is None else f"{sc.precision:.2f}"
                rec = "n/a" if sc.recall is None else f"{sc.recall:.2f}"
                line += f"; accuracy {sc.accuracy:.2f} on {sc.rows} labelled rows (precision {prec}, recall {rec})"
            out.print(line)
    except SemError as exc:
        err.print(f"[red]error[/red] ({type(exc).__name__}): {exc}")
        sys.exit(1)
    finally:
        con.close()
