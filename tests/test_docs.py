"""Documentation stays true: every setting is documented, the README's commands exist."""

from __future__ import annotations

import re
from pathlib import Path

import click
from click.testing import CliRunner

from duckdb_sem.cli.main import cli
from duckdb_sem.config import ENV_VARS

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_every_environment_variable_is_in_the_readme() -> None:
    for var in ENV_VARS:
        assert f"`{var}`" in README, f"{var} is not documented in README.md"


def test_readme_mentions_no_unknown_environment_variable() -> None:
    mentioned = set(re.findall(r"DUCKDB_SEM_[A-Z_]+", README))
    assert mentioned <= set(ENV_VARS), mentioned - set(ENV_VARS)


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "scripts/install dev" in README and "\nscripts/install dev" in ci
    assert "scripts/check" in README and "\nscripts/check" in ci


def test_cli_commands_in_the_readme_exist() -> None:
    runner = CliRunner()
    for command in set(re.findall(r"^(?:\$ )?duckdb-sem ([a-z-]+)", README, re.MULTILINE)):
        result = runner.invoke(cli, [command, "--help"])
        assert result.exit_code == 0, f"duckdb-sem {command}: {result.output}"


def test_every_environment_variable_the_code_reads_is_declared() -> None:
    used: set[str] = set()
    for folder in ("duckdb_sem", "tests", "scripts", "benchmarks"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and (path.suffix in {".py", ".sh"} or path.parent.name == "scripts"):
                used |= set(re.findall(r"DUCKDB_SEM_[A-Z_]*[A-Z]", path.read_text()))
    assert used <= set(ENV_VARS), f"declare in duckdb_sem/config.py: {sorted(used - set(ENV_VARS))}"


def _table_rows(text: str, heading: str) -> list[list[str]]:
    """The cells of the first Markdown table under ``heading``."""
    section = text.split(heading, 1)[1]
    rows = []
    for line in section.splitlines():
        if line.startswith("|---"):
            continue
        if line.startswith("|"):
            rows.append([c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]])
        elif rows:
            break
    return rows[1:]  # without the header


def test_the_readme_configuration_table_is_exactly_the_declared_settings() -> None:
    rows = _table_rows(README, "## Configuration")
    documented = {v for row in rows for v in re.findall(r"`(DUCKDB_SEM_[A-Z_]+)`", row[0])}
    assert documented == set(ENV_VARS)


def test_the_readme_defaults_are_the_code_defaults() -> None:
    from duckdb_sem.config import Settings
    from duckdb_sem.scheduler.policies import DEFAULT_AGING_RATE

    defaults = Settings()
    fields = {
        "DUCKDB_SEM_BACKEND": defaults.backend,
        "DUCKDB_SEM_BATCH_SIZE": defaults.batch_size,
        "DUCKDB_SEM_POLICY": defaults.policy,
        "DUCKDB_SEM_RUNTIME": defaults.runtime,
        "DUCKDB_SEM_SEU_ROWS": defaults.seu_rows,
        "DUCKDB_SEM_ESTIMATOR_SAMPLE": defaults.estimator_sample,
        "DUCKDB_SEM_AGING_RATE": f"{DEFAULT_AGING_RATE:g}",
    }
    table = {row[0].strip("`"): row[1] for row in _table_rows(README, "## Configuration")}
    for var, value in fields.items():
        assert table[var] == f"`{value}`", f"README says {var} defaults to {table[var]}"


def test_the_backend_option_table_is_exactly_the_declared_options() -> None:
    from duckdb_sem.backends.registry import known_kinds, options_of

    docs = (ROOT / "docs" / "backends.md").read_text()
    documented = {
        (row[0].strip("`:"), row[1].strip("`"), row[2])
        for row in _table_rows(docs, "## Spec options")
    }
    declared = {
        (kind, o.name, "yes" if o.answers else "no")
        for kind in known_kinds()
        for o in options_of(kind)
    }
    assert documented == declared


ARCHITECTURE = (ROOT / "docs" / "architecture.md").read_text()
PACKAGE = ROOT / "duckdb_sem"


def _modules_named(text: str) -> set[str]:
    """The ``folder/module.py`` paths a page names in backticks."""
    return set(re.findall(r"`((?:[a-z_]+/)+[a-z_]+\.py)`", text))


def test_every_module_the_architecture_page_names_exists() -> None:
    named = _modules_named(ARCHITECTURE)
    assert len(named) > 20, named  # the page draws the package, not a few files
    missing = sorted(p for p in named if not (PACKAGE / p).is_file() and not (ROOT / p).is_file())
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"


def test_the_architecture_page_names_every_module_of_the_session_package() -> None:
    session = {f"session/{p.name}" for p in (PACKAGE / "session").glob("*.py")}
    session.discard("session/__init__.py")
    named = _modules_named(ARCHITECTURE)
    assert session <= named, f"add to docs/architecture.md: {sorted(session - named)}"
    assert "runtime/submit.py" in named and "session/factory.py" in named


# Every page's claims about what exists: README.md and docs/*.md (docs/migrating.md included).
PAGES = {p.name: p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]}


def _pages_naming(pattern: str) -> dict[str, set[str]]:
    """Per page, the names ``pattern`` (one group) finds in it."""
    return {name: set(re.findall(pattern, text)) for name, text in PAGES.items()}


def test_no_page_mentions_an_unknown_environment_variable() -> None:
    for page, named in _pages_naming(r"DUCKDB_SEM_[A-Z_]*[A-Z]").items():
        # `DUCKDB_SEM_PRICE_IN`/`_OUT` abbreviates the second name
        unknown = {v for v in named if v not in ENV_VARS and f"{v}_IN" not in ENV_VARS}
        assert not unknown, f"{page} names undeclared variables: {sorted(unknown)}"


def _sql_functions() -> set[str]:
    """Every function name SQL can call on a ``connect()`` connection."""
    import duckdb_sem
    from duckdb_sem.surface.aliases import ALIASES
    from duckdb_sem.surface.table_functions import TABLE_FUNCTIONS

    con = duckdb_sem.connect(backend="test:", cache="off")
    try:
        rows = con.duckdb.execute(
            "SELECT DISTINCT function_name FROM duckdb_functions()"
        ).fetchall()
    finally:
        con.close()
    return {r[0].lower() for r in rows} | set(TABLE_FUNCTIONS) | {a.lower() for a in ALIASES}


def _relation_methods() -> set[str]:
    from duckdb_sem.session.relation import SemRelation

    return {name for name in dir(SemRelation) if name.startswith("sem_")}


def test_every_sem_function_a_page_calls_exists() -> None:
    known = _sql_functions() | _relation_methods()
    # ``df.sem_index(`` is LOTUS's pandas accessor (migrating.md's left column), not ours
    for page, named in _pages_naming(r"`[^`]*?(?<!df\.)\b(sem_[a-z_]+)\(").items():
        missing = sorted(n for n in named if n not in known)
        assert not missing, f"{page} calls functions that do not exist: {missing}"


def _exists(dotted: str) -> bool:
    """``duckdb_sem.a.b`` is a module, or an attribute of one, of the package."""
    import importlib

    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_every_module_and_setting_a_page_names_exists() -> None:
    from duckdb_sem.runtime.approximation import SETTINGS as APPROXIMATION
    from duckdb_sem.runtime.budget import SETTINGS as BUDGET

    settings = {f"duckdb_sem.{s}" for s in (*APPROXIMATION, *BUDGET)}
    for page, named in _pages_naming(r"\b(duckdb_sem(?:\.[A-Za-z_][A-Za-z_0-9]*)+)").items():
        missing = sorted(n for n in named if n not in settings and not _exists(n))
        assert not missing, f"{page} names what does not exist: {missing}"


def test_every_module_file_a_page_names_exists() -> None:
    # a page names a path from the package, the checkout, or the folder it is about
    roots = [PACKAGE, ROOT, ROOT / "benchmarks"]
    roots += [PACKAGE / d for d in ("backends", "runtime", "session")]
    for page, text in PAGES.items():
        named = _modules_named(text)
        missing = sorted(p for p in named if not any((r / p).is_file() for r in roots))
        assert not missing, f"{page} names modules that do not exist: {missing}"


def test_every_connect_option_a_page_names_exists() -> None:
    import inspect

    import duckdb_sem

    options = set(inspect.signature(duckdb_sem.connect).parameters)
    options |= set(inspect.signature(duckdb_sem.install).parameters)
    for page, named in _pages_naming(r"\b(?:connect|install)\((?:[^()]*?,\s*)?([a-z_]+)=").items():
        missing = sorted(named - options)
        assert not missing, f"{page} names connect()/install() options that do not exist: {missing}"


def test_the_checks_catch_what_does_not_exist() -> None:
    assert _exists("duckdb_sem.runtime.cascade") and _exists("duckdb_sem.demo.load_demo")
    assert not _exists("duckdb_sem.runtime.no_such_module")
    assert not _exists("duckdb_sem.demo.no_such_function")
    assert "sem_filter" in _sql_functions() and "sem_nonsense" not in _sql_functions()


def _shell_lines() -> dict[str, list[str]]:
    """Per page, the ``duckdb-sem ...`` command lines of its bash, sh, console and bare blocks."""
    from markdown_it import MarkdownIt

    found: dict[str, list[str]] = {}
    for page, text in PAGES.items():
        for token in MarkdownIt().parse(text):
            if token.type != "fence" or token.info.strip() not in ("bash", "sh", "console", ""):
                continue
            for line in token.content.splitlines():
                at = line.find("duckdb-sem ")
                if at >= 0:
                    found.setdefault(page, []).append(line[at:].split("#")[0].split("|")[0])
    return found


def test_every_cli_command_and_option_a_page_runs_exists() -> None:
    runner = CliRunner()
    lines = _shell_lines()
    assert sum(len(v) for v in lines.values()) > 10, lines  # the pages do show commands
    for page, commands in lines.items():
        for line in commands:
            words = line.split()
            name = next((w for w in words[1:] if not w.startswith("-")), None)
            if name is None:  # duckdb-sem --help, --version
                continue
            command = cli.get_command(click.Context(cli), name)
            assert command is not None, f"{page}: no command {name!r} in {line!r}"
            known = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
            known |= {"--help"}
            used = {w.split("=")[0] for w in words[words.index(name) + 1 :] if w.startswith("--")}
            assert used <= known, f"{page}: `{line.strip()}` uses unknown {sorted(used - known)}"
            assert runner.invoke(cli, [name, "--help"]).exit_code == 0
