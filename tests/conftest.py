"""Shared fixtures: every test gets its own cache file and a clean environment.

Tests schedule in process (``DUCKDB_SEM_SCHEDULER=inprocess``): the embedded backend's default,
a per-user local sidecar, would outlive a test and be shared between tests. The tests of that
default set their own environment (``tests/scheduler/test_default_local.py``). Whatever local
sidecar a test process started anyway is stopped at the end of the session, and fails it.
"""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend

# Property tests are deterministic: the same examples on every run and machine (CI included);
# `--hypothesis-seed=N` or HYPOTHESIS_PROFILE=explore searches afresh on a developer's machine.
# No per-example deadline: these tests check properties, not speed, and a loaded machine took
# 263 ms for an example of test_every_prefix_of_json_closes_into_json (a 200 ms deadline failed
# the fast tier as FlakyFailure).
settings.register_profile("deterministic", derandomize=True, deadline=None)
settings.register_profile("explore", derandomize=False, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))


#: marks the environment of this session's processes, and of the sidecars they start
SESSION_MARK = "DSEM_TEST_SESSION"
os.environ[SESSION_MARK] = uuid.uuid4().hex
# for the whole session, not only inside each test (``_isolated_env``): a module- or
# session-scoped fixture connects before any test's environment is set, and on ``llama:`` it
# would otherwise start the per-user local sidecar (test_three_ways_model's did)
os.environ["DUCKDB_SEM_SCHEDULER"] = "inprocess"


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("DUCKDB_SEM_BACKEND", "DUCKDB_SEM_BATCH_SIZE", "DUCKDB_SEM_POLICY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("DUCKDB_SEM_SCHEDULER", "inprocess")
    monkeypatch.setenv("DUCKDB_SEM_CACHE", str(tmp_path / "llm_cache.sqlite"))


@pytest.fixture(scope="session", autouse=True)
def _no_sidecar_outlives_the_session() -> Iterator[None]:
    yield
    left = _local_sidecars_of_this_session()
    for pid in left:
        os.kill(pid, signal.SIGTERM)
    assert not left, f"local scheduler sidecars left running by the tests (stopped): {left}"


def _local_sidecars_of_this_session() -> list[int]:
    """Live ``duckdb-sem serve --idle-exit`` processes (local sidecars) of this session."""
    mark = f"{SESSION_MARK}={os.environ[SESSION_MARK]}".encode()
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            environ = (entry / "environ").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and b"--idle-exit" in cmdline and mark in environ:
            found.append(int(entry.name))
    return found


@pytest.fixture
def rules() -> RuleBackend:
    """A fresh deterministic backend: yes iff the row mentions 'good' or 'great'."""
    return RuleBackend(yes_if=["good", "great"])


@pytest.fixture
def con(rules: RuleBackend, tmp_path: Path) -> Iterator[duckdb_sem.SemConnection]:
    c = duckdb_sem.connect(backend=rules, cache=str(tmp_path / "c.sqlite"))
    c.execute(
        "CREATE TABLE reviews AS SELECT * FROM (VALUES "
        "(1, 'a good film', 'drama', 4.5), (2, 'a bad film', 'drama', 1.0), "
        "(3, 'great fun', 'comedy', 5.0), (4, NULL, 'comedy', NULL), (5, 'dull', 'drama', 2.0)"
        ") t(id, text, genre, score)"
    )
    c.execute(
        "CREATE TABLE movies AS SELECT * FROM (VALUES (1, 'drama'), (2, 'comedy')) t(mid, genre)"
    )
    yield c
    c.close()


@pytest.fixture
def sqlglot_parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many statements sqlglot has parsed since the fixture started (``[count]``)."""
    import sqlglot.parser

    calls = [0]
    parse = sqlglot.parser.Parser.parse

    def counting(self: sqlglot.parser.Parser, *args: object, **kwargs: object) -> object:
        calls[0] += 1
        return parse(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(sqlglot.parser.Parser, "parse", counting)
    return calls
