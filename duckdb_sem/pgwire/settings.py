"""Session variables: ``SET``, ``RESET`` and ``SHOW``, answered by the server itself.

They change a dictionary per session (seeded from
:data:`~duckdb_sem.pgwire.commands.SESSION_DEFAULTS`), never DuckDB's configuration, which is
locked before clients connect. Example: ``SET application_name = 'psql'`` then
``SHOW application_name`` returns one row ``psql``; ``SHOW ALL`` lists every variable.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa

from duckdb_sem.pgwire import commands as cmd
from duckdb_sem.pgwire.results import Result

__all__ = ["run_setting"]

#: SHOW's column is the setting's own spelling in PostgreSQL (``SHOW timezone`` -> ``TimeZone``)
_SHOWN_AS = {"timezone": "TimeZone", "datestyle": "DateStyle", "intervalstyle": "IntervalStyle"}


def run_setting(settings: dict[str, str], command: cmd.Set | cmd.Reset | cmd.Show) -> Result:
    """Apply one settings command to a session's variables (in place) and answer it."""
    if isinstance(command, cmd.Set):
        settings[command.name] = command.value
        return Result.command("SET")
    if isinstance(command, cmd.Reset):
        if command.name == "all":
            settings.clear()
            settings.update(cmd.SESSION_DEFAULTS)
        elif command.name in cmd.SESSION_DEFAULTS:
            settings[command.name] = cmd.SESSION_DEFAULTS[command.name]
        return Result.command("RESET")
    return _show(settings, command.name)


def _show(settings: dict[str, str], name: str) -> Result:
    if name == "all":
        names = sorted(settings)
        table = pa.table(
            {
                "name": names,
                "setting": [settings[n] for n in names],
                "description": [""] * len(names),
            }
        )
    else:
        if name not in settings:
            raise duckdb.CatalogException(f'unrecognized configuration parameter "{name}"')
        column = _SHOWN_AS.get(name, name.replace(" ", "_"))
        table = pa.table({column: [settings[name]]})
    result = Result.of_rows("SHOW", table.schema, iter(table.to_batches()))
    result.fixed_tag = "SHOW"  # as PostgreSQL's: no row count
    return result
