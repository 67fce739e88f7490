"""Documentation stays true: every setting is documented, the README's commands exist."""

from __future__ import annotations

import re
from pathlib import Path

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
    assert "pip install -e '.[dev]'" in README and "pip install -e '.[dev]'" in ci
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
