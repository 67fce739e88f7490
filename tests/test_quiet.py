"""Quiet by default: no third-party log line reaches stderr unless ``-v`` asks for it."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

import duckdb_sem
from duckdb_sem.cli.main import _own_records


def test_explain_of_a_semantic_query_logs_no_sqlglot_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    con = duckdb_sem.connect(backend="test:", cache="off")
    duckdb_sem.load_demo(con, rows=3)
    with caplog.at_level(logging.DEBUG):
        plan = con.sql("EXPLAIN SELECT review_id FROM reviews WHERE sem_filter('Is it? {text}')")
        assert plan.fetchall()
    assert not [r for r in caplog.records if r.name.startswith("sqlglot")], caplog.text


def test_someone_elses_sqlglot_parse_still_warns(caplog: pytest.LogCaptureFixture) -> None:
    import sqlglot

    with caplog.at_level(logging.WARNING, logger="sqlglot"):
        sqlglot.parse("EXPLAIN SELECT 1 FROM t WHERE x", dialect="duckdb")
    assert "Falling back to parsing as a 'Command'" in caplog.text


def test_llama_cpp_lines_become_log_records_not_stderr(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("llama_cpp")
    from duckdb_sem.backends import llama_model

    llama_model._route_llama_logs()
    forward = llama_model._log_callback
    with caplog.at_level(logging.DEBUG, logger=llama_model.LLAMA_CPP_LOG.name):
        forward(3, b"llama_kv_cache_iswa: using full-size SWA cache\n", None)  # ggml WARN
        forward(4, b"llama_model_load: error loading model\n", None)  # ggml ERROR
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.INFO, "llama_kv_cache_iswa: using full-size SWA cache"),
        (logging.WARNING, "llama_model_load: error loading model"),
    ]
    assert capfd.readouterr().err == ""


def test_the_cli_shows_only_its_own_records_without_verbose() -> None:
    def record(name: str) -> logging.LogRecord:
        return logging.LogRecord(name, logging.WARNING, __file__, 1, "x", None, None)

    assert _own_records(record("duckdb_sem.runtime.operators"))
    assert not _own_records(record("sqlglot"))
    assert not _own_records(record("httpx"))
    assert not _own_records(record("duckdb_semantic"))  # a prefix is not a package


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "duckdb_sem.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.slow
def test_the_cli_is_quiet_by_default_and_verbose_on_request() -> None:
    query = (
        "query", "--backend", "test:", "--cache", "off", "--no-stats", "--no-progress", "--demo",
        "EXPLAIN SELECT review_id FROM reviews WHERE sem_filter('Is it? {text}')",
    )  # fmt: skip
    quiet = _cli(*query)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == "" and "Projection" in quiet.stdout
    loud = _cli("-vv", *query)
    assert loud.returncode == 0, loud.stderr
    assert "DEBUG " in loud.stderr
