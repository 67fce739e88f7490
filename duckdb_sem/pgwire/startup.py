"""Settings a client sets at connect: the startup packet's parameters and its ``-c`` options.

libpq sends ``PGOPTIONS``/``options='-c TimeZone=Europe/Berlin -c duckdb_sem.max_llm_calls=5'``
as one ``options`` parameter; PostgreSQL splits it on spaces (a backslash keeps the next
character, so ``-c search_path=a,\\ b``), reads ``-c name=value`` and ``--name=value`` (a dash in
the name is an underscore), then applies the other startup parameters (``application_name``,
and any setting a driver sends by name, such as pgjdbc's ``TimeZone``), which win over the
options. Each name is judged as PostgreSQL 15 judges it (:mod:`.gucs`), as ``SET`` judges it;
a bad one ends the connection with a FATAL error of PostgreSQL's SQLSTATE before the session
starts.

Example: ``startup_settings({"user": "u", "options": "-c TimeZone=Asia/Tokyo"})`` is
``[("timezone", "Asia/Tokyo")]``.
"""

from __future__ import annotations

from collections.abc import Mapping

from duckdb_sem.errors import ConfigError
from duckdb_sem.pgwire.commands import SESSION_DEFAULTS
from duckdb_sem.pgwire.gucs import CONTEXTS

__all__ = ["SettingNameError", "check_setting_name", "split_options", "startup_settings"]

#: startup parameters that are not settings
_NOT_SETTINGS = frozenset({"user", "database", "options", "replication"})
_SETTABLE = (
    CONTEXTS["user"] | CONTEXTS["backend"] | (frozenset(SESSION_DEFAULTS) - CONTEXTS["internal"])
)


class SettingNameError(ConfigError):
    """A setting (at connect or in ``SET``) PostgreSQL would refuse; ``sqlstate`` is
    PostgreSQL's for the case (42704, 55P02, 42501, 42601)."""

    def __init__(self, message: str, *, sqlstate: str) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


def split_options(text: str) -> list[str]:
    """PostgreSQL's ``pg_split_opts``: words split on whitespace, ``\\`` escaping one char."""
    words: list[str] = []
    word: list[str] | None = None
    escaped = False
    for ch in text:
        if escaped:
            word = (word or []) + [ch]
            escaped = False
        elif ch == "\\":
            word = word or []
            escaped = True
        elif ch.isspace():
            if word is not None:
                words.append("".join(word))
            word = None
        else:
            word = (word or []) + [ch]
    if word is not None:
        words.append("".join(word))
    return words


def _long_option(arg: str, shown: str) -> tuple[str, str]:
    name, sep, value = arg.partition("=")
    if not sep:
        raise SettingNameError(f"{shown} requires a value", sqlstate="42601")
    return name.replace("-", "_").lower(), value


def _options(text: str) -> list[tuple[str, str]]:
    args = split_options(text)
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "-c" and i + 1 < len(args):
            i += 1
            out.append(_long_option(args[i], f"-c {args[i]}"))
        elif arg.startswith("-c") and len(arg) > 2:
            out.append(_long_option(arg[2:], f"-c {arg[2:]}"))
        elif arg.startswith("--") and len(arg) > 2:
            out.append(_long_option(arg[2:], arg))
        else:
            raise SettingNameError(
                f"invalid command-line argument for server process: {arg} (this server reads "
                "only -c name=value and --name=value in options)",
                sqlstate="42601",
            )
        i += 1
    return out


def startup_settings(params: Mapping[str, str]) -> list[tuple[str, str]]:
    """(name, value) of each setting the startup packet makes, in the order they apply."""
    out = _options(params.get("options", ""))
    for key, value in params.items():
        if key not in _NOT_SETTINGS and not key.startswith("_pq_."):
            out.append((key.lower(), value))
    return out


def check_setting_name(name: str) -> None:
    """Raise as PostgreSQL 15 would for a setting ``name`` no session may set (at connect, in
    ``SET`` and ``RESET``)."""
    if "." in name or name in _SETTABLE:
        return  # a dotted name is an extension's (duckdb_sem.* is checked when applied)
    if name in CONTEXTS["superuser"] or name in CONTEXTS["superuser-backend"]:
        raise SettingNameError(f'permission denied to set parameter "{name}"', sqlstate="42501")
    if name in CONTEXTS["postmaster"]:
        raise SettingNameError(
            f'parameter "{name}" cannot be changed without restarting the server',
            sqlstate="55P02",
        )
    if name in CONTEXTS["sighup"] or name in CONTEXTS["internal"]:
        raise SettingNameError(f'parameter "{name}" cannot be changed now', sqlstate="55P02")
    raise SettingNameError(f'unrecognized configuration parameter "{name}"', sqlstate="42704")
