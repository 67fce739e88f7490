"""``duckdb-sem``: the command group. Each subcommand lives in its own module under ``cli/``.

Subcommands are listed in ``_COMMANDS`` as ``name -> "module:attribute"`` and imported only when
used, so ``duckdb-sem --help`` stays fast and a heavy optional dependency of one command never
breaks the others.
"""

from __future__ import annotations

import importlib
import logging

import click

from duckdb_sem.cli.common import env_epilog

__all__ = ["cli", "main"]

_COMMANDS: dict[str, str] = {
    "query": "duckdb_sem.cli.query:query",
    "demo": "duckdb_sem.cli.demo:demo",
    "sim-server": "duckdb_sem.cli.sim_server:sim_server",
    "serve": "duckdb_sem.cli.serve:serve",
    "top": "duckdb_sem.cli.top:top",
    "pgwire": "duckdb_sem.cli.pgwire:pgwire",
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = _COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, _, attr = target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            if err.name != module_name:
                raise
            return None  # command not built yet in this version
        command: click.Command = getattr(module, attr)
        return command


@click.group(cls=_LazyGroup, epilog=env_epilog())
@click.version_option(package_name="duckdb-sem", prog_name="duckdb-sem")
@click.option(
    "-v",
    "--verbose",
    count=True,
    help="Log more (-v info, -vv debug) to stderr, other libraries' log lines too.",
)
def cli(verbose: int) -> None:
    """Semantic SQL for DuckDB: sem_filter, sem_map, sem_join and sem_agg backed by LLMs."""
    level = logging.WARNING - 10 * min(verbose, 2)
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    if not verbose:
        handler.addFilter(_own_records)
    logging.basicConfig(level=level, handlers=[handler])


def _own_records(record: logging.LogRecord) -> bool:
    """By default only duckdb-sem's own warnings reach stderr: a third-party library's (sqlglot
    falling back to a Command, llama.cpp's loader) is noise to a user, and ``-v`` shows it."""
    return record.name == "duckdb_sem" or record.name.startswith("duckdb_sem.")


def main() -> None:
    cli(prog_name="duckdb-sem")


if __name__ == "__main__":
    main()
