"""The embedded backend's default road: with no scheduler chosen, the processes of a user that
run ``llama:`` share one local sidecar (one model in memory); ``inprocess`` keeps a process's
own; a sidecar that cannot start leaves the connection in process with one warning.

The other tests schedule in process (``tests/conftest.py``); these unset that, each in a short
``TMPDIR`` of its own whose sidecars are stopped at the end (``local_helpers.short_tmpdir``).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from local_helpers import get, paths_in, servers, short_tmpdir, until, usage
from processes import stop

import duckdb_sem
from duckdb_sem.config import Settings
from duckdb_sem.errors import BudgetExceededError, ConfigError
from duckdb_sem.scheduler import shared
from duckdb_sem.scheduler.shared import shares_by_default

SPEC = "llama:?threads=1"

CLIENT = r"""
import json, sys
import duckdb_sem
rows = int(sys.argv[1])
con = duckdb_sem.connect(backend="llama:?threads=1")  # no scheduler= and none in the environment
client = con.models.client(None)
out = {"in_process": con.models.backend(None) is not None,
       "pid": getattr(client, "server_pid", None)}
if rows:
    con.execute("CREATE TABLE t AS SELECT CASE WHEN i % 2 = 0 THEN 'A great film, I loved it'"
                " ELSE 'A dull film, I hated it' END || ' (' || i || ')' AS text"
                " FROM range($1) r(i)", [rows])
    sql = "SELECT text FROM t WHERE sem_filter('{text} is a positive review') ORDER BY text"
    out["answers"] = [text for (text,) in con.sql(sql).fetchall()]
with open("/proc/self/maps") as maps:  # a process that loads a model maps its GGUF file
    out["model_mapped"] = any(".gguf" in line for line in maps)
print(json.dumps(out), flush=True)
"""


@pytest.fixture
def tmpdir_short() -> Iterator[Path]:
    with short_tmpdir() as folder:
        yield folder


@pytest.fixture
def default_road(monkeypatch: pytest.MonkeyPatch) -> None:
    """No scheduler chosen, and no failure of an earlier test remembered."""
    monkeypatch.delenv("DUCKDB_SEM_SCHEDULER")
    monkeypatch.setattr(shared, "_local_failed", set())


def _client(tmp: Path, rows: int, **env_extra: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUCKDB_SEM_")}
    env |= {"TMPDIR": str(tmp), "DUCKDB_SEM_CACHE": "off", "DUCKDB_SEM_SCHEDULER_IDLE": "60"}
    env |= env_extra
    return subprocess.Popen(
        [sys.executable, "-c", CLIENT, str(rows)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _output(proc: subprocess.Popen[str], timeout: float = 600) -> dict[str, object]:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-3000:]
    found: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return found


def test_only_embedded_backends_share_by_default() -> None:
    assert shares_by_default("llama:") and shares_by_default("llama:?threads=1&n_ctx=4096")
    assert shares_by_default("llama:/models/other.gguf")
    for spec in ("test:", "sim:default", "openai:http://127.0.0.1:8000/v1?model=m", "nope:"):
        assert not shares_by_default(spec), spec


def test_an_unknown_scheduler_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(
        ConfigError, match=r"'in-process' is not a scheduler: use local .*inprocess"
    ):
        duckdb_sem.connect(backend="test:", scheduler="in-process")
    monkeypatch.setenv("DUCKDB_SEM_SCHEDULER", "sidecar")
    with pytest.raises(ConfigError, match="'sidecar' is not a scheduler"):
        Settings.from_env()


def test_other_backends_stay_in_process_by_default(default_road: None) -> None:
    con = duckdb_sem.connect(backend="test:", cache="off")
    try:
        assert con.models.backend(None) is not None
    finally:
        con.close()


def test_a_sidecar_that_cannot_start_leaves_the_connection_in_process_with_one_warning(
    default_road: None,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    long = tmp_path / ("t" * 100)  # the sidecar's socket path would not fit a unix socket
    long.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(long))
    with caplog.at_level(logging.WARNING, logger="duckdb_sem.scheduler.shared"):
        cons = [duckdb_sem.connect(backend=SPEC, cache="off") for _ in range(2)]
    try:
        assert all(con.models.backend(None) is not None for con in cons)  # its own model
        assert cons[0].sql("SELECT 42").fetchall() == [(42,)]
    finally:
        for con in cons:
            con.close()
    said = [r.getMessage() for r in caplog.records if r.name == shared.__name__]
    # one fallback warning for the two connections (a connection of plain 'llama:' that
    # another test left open may add the warning that threads=1 runs on its backend)
    (warning,) = [m for m in said if "could not start" in m]
    assert "set TMPDIR to a shorter folder" in warning
    assert "DUCKDB_SEM_SCHEDULER=inprocess" in warning
    # asked for explicitly, the same failure is an error
    with pytest.raises(ConfigError, match="longer than a unix socket allows"):
        duckdb_sem.connect(backend="test:", cache="off", scheduler="local")


@pytest.mark.integration
def test_a_bad_embedded_spec_is_its_own_error_not_the_fallback_warning(
    default_road: None,
    monkeypatch: pytest.MonkeyPatch,
    tmpdir_short: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmpdir_short))
    with pytest.raises(ConfigError, match="threads >= 1"):  # the sidecar exited on it too
        duckdb_sem.connect(backend="llama:?threads=0", cache="off")
    assert not [r for r in caplog.records if r.name == shared.__name__]
    assert "threads >= 1" in paths_in(tmpdir_short, "llama:?threads=0").log.read_text()


@pytest.mark.integration
def test_caps_and_stats_hold_through_the_local_sidecar(
    monkeypatch: pytest.MonkeyPatch, tmpdir_short: Path
) -> None:
    """What a connection chooses (batch size, budget) still applies when its work runs in the
    sidecar: a budget is counted from the sidecar's answers."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmpdir_short))
    spec = "test:?yes_if=good"
    options = {"backend": spec, "cache": "off", "scheduler": "local", "batch_size": 4}
    con = duckdb_sem.connect(**options, max_llm_calls=6)  # type: ignore[arg-type]
    capped = duckdb_sem.connect(**options, max_llm_calls=6)  # type: ignore[arg-type]
    try:
        assert con.models.backend(None) is None  # nothing of the backend in this process
        sql = (
            "SELECT count(*) FROM range({n}) r(i) WHERE sem_filter('Is {{0}} positive?', "
            "'row ' || i || CASE WHEN i % 2 = 0 THEN ' good' ELSE '' END)"
        )
        assert con.sql(sql.format(n=5)).fetchall() == [(3,)]
        assert con.stats().physical_calls == 5
        with pytest.raises(BudgetExceededError):
            capped.sql(sql.format(n=40)).fetchall()
    finally:
        con.close()
        capped.close()
    assert len(servers(tmpdir_short)) == 1
    assert usage(paths_in(tmpdir_short, spec))["physical_calls"] < 40


@pytest.mark.integration
def test_inprocess_keeps_the_embedded_model_in_the_process(tmpdir_short: Path) -> None:
    out = _output(_client(tmpdir_short, 0, DUCKDB_SEM_SCHEDULER="inprocess"))
    assert out["in_process"] is True and out["pid"] is None
    assert not servers(tmpdir_short)


@pytest.mark.integration
@pytest.mark.model
@pytest.mark.slow
def test_default_processes_share_one_sidecar_and_load_no_model(tmpdir_short: Path) -> None:
    # what the same model answers in a process of its own (a fixed expected answer would
    # depend on the llama.cpp build's float results: these rows are not what is under test)
    alone = _output(_client(tmpdir_short, 2, DUCKDB_SEM_SCHEDULER="inprocess"))
    assert alone["model_mapped"] is True and not servers(tmpdir_short), alone
    procs = [_client(tmpdir_short, 2) for _ in range(2)]
    outs = [_output(p) for p in procs]
    (server,) = servers(tmpdir_short)
    for out in outs:
        assert out["in_process"] is False and out["pid"] == server, out
        assert out["model_mapped"] is False, out  # no model in the client's memory
        assert out["answers"] == alone["answers"], out
    paths = paths_in(tmpdir_short, SPEC)
    assert get(paths, "/v1/health")["pid"] == server
    assert usage(paths)["virtual_calls"] == 4  # both processes' rows, on that one model


@pytest.mark.integration
@pytest.mark.model
@pytest.mark.slow
def test_a_killed_default_client_leaves_nothing_stuck(tmpdir_short: Path) -> None:
    paths = paths_in(tmpdir_short, SPEC)
    victim = _client(tmpdir_short, 200)
    try:
        assert until(lambda: paths.socket.exists() and usage(paths)["physical_calls"] > 0, 300)
        (server,) = servers(tmpdir_short)
        victim.kill()
        victim.communicate()
    finally:
        stop(victim)
    # its query is cancelled: nothing stays in flight, and the next process is served at once
    assert until(lambda: get(paths, "/v1/status")["in_flight_requests"] == 0, 30)
    out = _output(_client(tmpdir_short, 2), timeout=120)
    assert out["pid"] == server  # the same sidecar, and its query ran to its end (exit 0)
    answers = out["answers"]
    assert isinstance(answers, list)
    assert set(answers) <= {"A great film, I loved it (0)", "A dull film, I hated it (1)"}
