"""``duckdb-sem query``: SQL from a file or stdin, several statements, every type in every format."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from duckdb_sem.cli.main import cli
from duckdb_sem.config import ENV_VARS

TYPES = (
    "SELECT [1, 2] AS l, {'a': 1, 'b': 'x'} AS s, MAP {'k': 2} AS m, 1.25::DECIMAL(5, 2) AS d, "
    "TIMESTAMP '2020-01-02 03:04:05' AS ts, '\\xAA\\x00'::BLOB AS b, NULL AS n, 'a,\"b' AS v, "
    "INTERVAL 3 DAY AS i"
)


def run(*args: str, input: str | None = None) -> tuple[int, str, str]:
    result = CliRunner(env={"COLUMNS": "200"}).invoke(
        cli,
        ["query", "--backend", "test:?yes_if=good", "--cache", "off", "--no-progress", *args],
        input=input,
    )
    return result.exit_code, result.stdout, result.stderr


def test_several_statements_each_result_in_order() -> None:
    code, out, _ = run("--format", "csv", "SELECT 1 AS a; SELECT 'two' AS b; SELECT 3 AS c")
    assert code == 0
    assert out == "a\n1\n\nb\ntwo\n\nc\n3\n"


def test_statements_share_one_connection_and_ddl_prints_nothing() -> None:
    sql = "CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (4), (5); SELECT sum(x) AS s FROM t"
    code, out, _ = run("--format", "json", sql)
    assert code == 0
    assert out.splitlines() == ['[{"Count":2}]', '[{"s":9}]']


def test_sql_from_a_file(tmp_path: Path) -> None:
    script = tmp_path / "q.sql"
    script.write_text(
        "-- reviews\nCREATE TABLE r AS SELECT * FROM (VALUES (1, 'good; fun'), (2, 'bad')) t(id, text);\n"
        "SELECT id FROM r WHERE sem_filter('Is it fun? {text}') ORDER BY id;\n"
    )
    code, out, _ = run("--format", "csv", "-f", str(script))
    assert code == 0
    assert out.endswith("id\n1\n")


def test_sql_from_stdin_with_a_dash() -> None:
    code, out, _ = run("--format", "csv", "-", input="SELECT 7 AS seven;\nSELECT 8 AS eight;")
    assert code == 0
    assert out == "seven\n7\n\neight\n8\n"


def test_csv_writes_every_type_as_duckdb_does() -> None:
    code, out, err = run("--format", "csv", TYPES)
    assert code == 0, err
    assert out.splitlines() == [
        "l,s,m,d,ts,b,n,v,i",
        '"[1, 2]","{\'a\': 1, \'b\': x}",{k=2},1.25,2020-01-02 03:04:05,\\xAA\\x00,,"a,""b",3 days',
    ]


def test_json_writes_every_type_as_duckdb_does() -> None:
    code, out, err = run("--format", "json", TYPES)
    assert code == 0, err
    assert json.loads(out) == [{
        "l": [1, 2], "s": {"a": 1, "b": "x"}, "m": {"k": 2}, "d": 1.25,
        "ts": "2020-01-02 03:04:05", "b": "\\xAA\\x00", "n": None, "v": 'a,"b', "i": "3 days",
    }]  # fmt: skip


def test_json_writes_one_document_per_statement() -> None:
    sql = "SELECT 1 AS a UNION ALL SELECT 2; SELECT 'x\ny\tz' AS b; SELECT 1 AS c WHERE false"
    code, out, err = run("--format", "json", sql)
    assert code == 0, err
    assert [json.loads(line) for line in out.splitlines()] == [
        [{"a": 1}, {"a": 2}],
        [{"b": "x\ny\tz"}],
        [],
    ]


def test_csv_gives_each_statement_its_own_header_after_a_blank_line() -> None:
    code, out, err = run("--format", "csv", "SELECT 1 AS a, 2 AS b; SELECT 1 AS c WHERE false")
    assert code == 0, err
    assert out.split("\n\n") == ["a,b\n1,2", "c\n"]


def test_explain_prints_as_text_not_in_a_table_box() -> None:
    sql = (
        "CREATE TABLE r AS SELECT range AS id, 'row ' || range AS text FROM range(4);"
        "EXPLAIN SEMANTIC SELECT id FROM r WHERE sem_filter('Is it good? {text}');"
        "EXPLAIN SELECT 1"
    )
    code, out, err = run("--format", "table", sql)
    assert code == 0, err
    lines = out.splitlines()
    assert "1 equivalent plans" in lines and any(x.startswith("estimated: calls≈4") for x in lines)
    assert any("Projection" in x for x in lines)  # DuckDB's own plan drawing
    assert "plan" not in {x.strip("┃│ ") for x in lines}, out  # no result header, no table box
    assert "explain_value" not in out and "physical_plan" not in out


def test_table_renders_every_type_as_duckdb_casts_it() -> None:
    code, out, err = run("--format", "table", TYPES)
    assert code == 0, err
    for shown in ("[1, 2]", "{k=2}", "1.25", "2020-01-02 03:04:05", "\\xAA\\x00", "NULL"):
        assert shown in out
    assert "Decimal(" not in out and "b'\\xaa" not in out


def test_an_error_stops_the_run_after_the_results_before_it() -> None:
    code, out, err = run("--format", "csv", "SELECT 1 AS a; SELECT * FROM missing; SELECT 2 AS b")
    assert code == 1
    assert out == "a\n1\n"
    assert "missing" in err and "Traceback" not in err


def test_no_sql_is_a_usage_error() -> None:
    code, _, err = run(input="")
    assert code == 2 and "holds no statement" in err


def test_help_lists_every_environment_variable() -> None:
    for args in (["--help"], ["query", "--help"]):
        result = CliRunner().invoke(cli, args, terminal_width=200)
        assert result.exit_code == 0
        missing = [v for v in ENV_VARS if v not in result.output]
        assert not missing, f"duckdb-sem {' '.join(args)} does not list {missing}"


def _cli(*args: str, input: str) -> subprocess.CompletedProcess[str]:
    """The real command in a child process: stdin a pipe, stdout and stderr not terminals."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUCKDB_SEM_")}
    return subprocess.run(
        [sys.executable, "-m", "duckdb_sem.cli.main", "query", "--cache", "off", *args],
        input=input, capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.integration
def test_piped_stdin_runs_every_statement() -> None:
    done = _cli("--backend", "test:", "--format", "csv", input="SELECT 1 AS a;\nSELECT 2 AS b\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "a\n1\n\nb\n2\n"


@pytest.mark.integration
def test_progress_lines_on_a_stderr_that_is_not_a_terminal() -> None:
    # 300 rows at 100 ms per batch of 8 requests: about 4 s of LLM work on the SEU loop
    sql = (
        "CREATE TABLE r AS SELECT range AS id, 'row ' || range AS text FROM range(300);\n"
        "SELECT count(*) AS n FROM r WHERE sem_filter('{text} is good');\n"
    )
    done = _cli("--backend", "test:?yes_if=zzz&latency_ms=100&max_batch=8", "--format", "csv",
                "--progress-every", "0.5", input=sql)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("n\n0\n")
    lines = [x for x in done.stderr.splitlines() if x.startswith("duckdb-sem: ")]
    assert len(lines) >= 3, done.stderr
    shares = [int(x.split("%")[0].split()[-1]) for x in lines]
    assert shares == sorted(shares) and shares[-1] > shares[0], lines  # the LLM work shows
    assert all("rows " in x and "LLM " in x and len(x) <= 100 for x in lines)
    assert "\x1b[" not in done.stderr  # plain text, no terminal control codes


def test_an_empty_query_result_is_shown_and_a_setting_is_not() -> None:
    sql = "SET duckdb_sem.max_llm_calls = 5; SET threads = 1; SELECT 1 AS a WHERE false"
    code, out, _ = run("--format", "csv", sql)
    assert code == 0
    assert out == "a\n"


def test_explain_semantic_from_the_command_line_shows_the_estimate() -> None:
    sql = (
        "CREATE TABLE r AS SELECT range AS id, 'row ' || range AS text FROM range(40);"
        "EXPLAIN SEMANTIC SELECT id FROM r WHERE sem_filter('Is it good? {text}')"
    )
    code, out, _ = run("--format", "csv", sql)
    assert code == 0
    assert "estimated: calls≈40" in out and "time≈" in out


def test_show_prompts_explains_only_the_queries() -> None:
    sql = (
        "CREATE TABLE r AS SELECT 'a good film' AS text; SET duckdb_sem.max_llm_calls = 5; "
        "SELECT * FROM r WHERE sem_filter('Is it positive? {text}')"
    )
    code, out, err = run("--format", "csv", "--show-prompts", sql)
    assert code == 0, err
    assert err.count("prompts (the first row of each operator):") == 1
    assert "Is it positive? a good film" in err
    assert out.endswith("text\na good film\n")
