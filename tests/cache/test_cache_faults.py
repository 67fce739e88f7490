"""Cache faults: a disk that refuses writes never fails a query; a damaged entry is never trusted.

Three kinds of refusal, each as real as the machine allows: a write that fails at the SQLite
layer (a connection whose ``executemany`` raises what SQLite or the OS raises on a full or
read-only disk: a seam, so it runs everywhere); a ``chmod 0444`` file (skipped as root, where
permissions do not stop writes); and, where user namespaces are allowed, a real read-only bind
mount and a real full tmpfs, each in a child process under ``unshare``.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest

import duckdb_sem
from duckdb_sem.cache.faults import CacheMode
from duckdb_sem.cache.store import Connect, LLMCache
from duckdb_sem.llm.request import Completion
from duckdb_sem.scheduler import shared

SPEC = "test:?yes_if=good"
SQL = (
    "SELECT i, sem_filter('{0} ok', CASE WHEN i % 3 = 0 THEN 'good ' ELSE '' END || 'r' "
    "|| i::VARCHAR) FROM range(N) t(i) ORDER BY i"
)
WARNING = "cannot be written"


def _sql(n: int) -> str:
    return SQL.replace("range(N)", f"range({n})")


def _completion(value: object) -> Completion:
    return Completion(value, str(value), 10, 2, score=0.5)


def _sqlite_error(message: str, code: int) -> Callable[[], BaseException]:
    def make() -> BaseException:
        err = sqlite3.OperationalError(message)
        err.sqlite_errorcode = code
        return err

    return make


def _os_error(code: int) -> Callable[[], BaseException]:
    return lambda: OSError(code, os.strerror(code))


FAILURES = {
    "sqlite-full": _sqlite_error("database or disk is full", sqlite3.SQLITE_FULL),
    "sqlite-readonly": _sqlite_error(
        "attempt to write a readonly database", sqlite3.SQLITE_READONLY
    ),
    "ENOSPC": _os_error(errno.ENOSPC),
    "EROFS": _os_error(errno.EROFS),
    "EACCES": _os_error(errno.EACCES),
}


def _refusing(failure: Callable[[], BaseException]) -> tuple[Connect, list[bool]]:
    """A real SQLite connection whose writes raise ``failure()`` once ``armed[0]`` is set."""
    armed = [False]

    class Refusing(sqlite3.Connection):
        def executemany(self, sql: str, parameters: object, /) -> sqlite3.Cursor:
            if armed[0]:
                raise failure()
            return super().executemany(sql, parameters)  # type: ignore[arg-type]

    def connect(*args: object, **kwargs: object) -> sqlite3.Connection:
        return sqlite3.connect(*args, factory=Refusing, **kwargs)  # type: ignore[call-overload, no-any-return]

    return connect, armed


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if WARNING in r.getMessage()]


@pytest.mark.parametrize("failure", list(FAILURES))
def test_a_refused_write_goes_read_only_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, failure: str
) -> None:
    connect, armed = _refusing(FAILURES[failure])
    cache = LLMCache(tmp_path / "c.sqlite", connect=connect)
    cache.put_many({"old": _completion(True)})
    armed[0] = True
    with caplog.at_level(logging.WARNING, logger="duckdb_sem.cache"):
        cache.put_many({"new": _completion(False)})  # refused: no error
        cache.put_many({"newer": _completion(False)})  # not even tried again
    assert cache.mode is CacheMode.READ_ONLY
    assert cache.stats().write_failures == 1
    assert cache.get_many(["old", "new", "newer"]) == {"old": _completion(True)}
    (warning,) = _warnings(caplog)
    assert str(tmp_path / "c.sqlite") in warning and "read-only" in warning
    assert "free space" in warning and "DUCKDB_SEM_CACHE" in warning and "'off'" in warning


def test_a_full_disk_mid_query_returns_the_answers_uncached(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    connect, armed = _refusing(FAILURES["sqlite-full"])
    monkeypatch.setattr(shared, "LLMCache", partial(LLMCache, connect=connect))
    expected = _query(None, 60)
    path = tmp_path / "c.sqlite"
    assert _query(path, 20) == expected[:20]  # 20 answers cached before the disk fills
    armed[0] = True
    with caplog.at_level(logging.WARNING, logger="duckdb_sem.cache"):
        con = duckdb_sem.connect(backend=SPEC, cache=str(path), batch_size=8)
        assert con.sql(_sql(60)).fetchall() == expected
        stats = con.stats()
        assert stats.cache_hits == 20 and stats.physical_calls == 40
        assert con.sql(_sql(60)).fetchall() == expected  # again: still no error
        con.close()
    assert len(_warnings(caplog)) == 1
    assert LLMCache(path).get_many(["x"]) == {}  # the file itself is fine


def _query(path: Path | None, n: int) -> list[tuple[object, ...]]:
    con = duckdb_sem.connect(backend=SPEC, cache=str(path) if path else "off", batch_size=8)
    try:
        return con.sql(_sql(n)).fetchall()
    finally:
        con.close()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through chmod 0444")
def test_a_chmod_0444_cache_is_read_only_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "c.sqlite"
    writer = LLMCache(path)
    writer.put_many({"old": _completion(True)})
    writer.close()
    path.chmod(0o444)
    with caplog.at_level(logging.WARNING, logger="duckdb_sem.cache"):
        cache = LLMCache(path)
        cache.put_many({"new": _completion(False)})
        cache.put_many({"newer": _completion(False)})
    assert cache.mode is CacheMode.READ_ONLY
    assert cache.get_many(["old", "new"]) == {"old": _completion(True)}
    assert len(_warnings(caplog)) == 1


def test_a_tampered_entry_is_asked_again_and_overwritten(tmp_path: Path) -> None:
    first = tmp_path / "first.sqlite"
    n = 30
    expected = _query(first, n)
    goods = sum(1 for _, ok in expected if ok)
    assert 0 < goods < n
    with sqlite3.connect(first) as db:  # the answers into the main file, to edit its bytes
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    tampered = tmp_path / "tampered.sqlite"
    shutil.copyfile(first, tampered)
    data = tampered.read_bytes()
    # every "yes" answer's stored value becomes null (same length: SQLite sees nothing wrong)
    assert data.count(b'"value": true') == goods
    tampered.write_bytes(data.replace(b'"value": true', b'"value": null'))
    with sqlite3.connect(tampered) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)

    con = duckdb_sem.connect(backend=SPEC, cache=str(tampered), batch_size=8)
    assert con.sql(_sql(n)).fetchall() == expected  # never the tampered NULLs
    stats = con.stats()
    assert stats.physical_calls == goods and stats.cache_hits == n - goods
    cache = shared.open_cache(tampered)
    assert cache is not None and cache.stats().damaged == goods
    con.close()
    # overwritten: a fresh reader finds every entry whole
    fresh = LLMCache(tampered, retry_failures=True)
    with sqlite3.connect(tampered) as db:
        signatures = [s for (s,) in db.execute("SELECT signature FROM completions")]
    assert len(fresh.get_many(signatures)) == n and fresh.stats().damaged == 0


def test_an_entry_moved_to_another_signature_is_damaged(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    cache = LLMCache(path)
    cache.put_many({"a": _completion(True), "b": _completion(False)})
    with sqlite3.connect(path) as db:  # b's row now holds a's answer and checksum
        db.execute(
            "UPDATE completions SET (completion, checksum) = "
            "(SELECT completion, checksum FROM completions WHERE signature = 'a') "
            "WHERE signature = 'b'"
        )
    reader = LLMCache(path)
    assert reader.get_many(["a", "b"]) == {"a": _completion(True)}
    assert reader.stats().damaged == 1


def test_entries_of_an_old_cache_are_misses_once_then_checked(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:  # the schema before checksums
        db.execute(
            "CREATE TABLE completions (signature TEXT PRIMARY KEY, completion TEXT NOT NULL, "
            "created REAL NOT NULL)"
        )
        db.execute("INSERT INTO completions VALUES ('a', ?, 0)", (_completion(1).to_json(),))
    cache = LLMCache(path)  # migrated: the column is added
    assert cache.get_many(["a"]) == {}
    assert cache.stats().unchecked == 1
    cache.put_many({"a": _completion(1)})
    assert cache.get_many(["a"]) == {"a": _completion(1)}


# -- real read-only and full file systems, in a user and mount namespace -----------------------
_CHILD = textwrap.dedent(
    """
    import json, logging, sys
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(message)s")
    import duckdb_sem
    from duckdb_sem.scheduler import shared
    path, n = sys.argv[1], int(sys.argv[2])
    con = duckdb_sem.connect(backend="test:?yes_if=good", cache=path, batch_size=8)
    sql = {sql!r}.replace("range(N)", f"range({{n}})")
    rows = con.sql(sql).fetchall()
    stats = con.stats()
    again = con.sql(sql).fetchall()
    cache = shared.open_cache(__import__("pathlib").Path(path))
    print(json.dumps({{"rows": rows, "again": again == rows, "hits": stats.cache_hits,
                      "mode": cache.mode.value if cache is not None else None}}))
    """
).format(sql=SQL)


def _namespaces() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True, check=False)
    return probe.returncode == 0


needs_namespaces = pytest.mark.skipif(
    not _namespaces(), reason="needs unshare -rm (user and mount namespaces)"
)


def _in_namespace(tmp_path: Path, shell: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "child.py"
    script.write_text(_CHILD)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DUCKDB_SEM_")}
    env["CHILD"] = f"{sys.executable} {script}"
    return subprocess.run(["unshare", "-rm", "sh", "-ec", shell], capture_output=True,
                          text=True, env=env, timeout=120, check=False)  # fmt: skip


def _result(proc: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert proc.returncode == 0, proc.stderr[-3000:]
    out: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


@pytest.mark.integration
@needs_namespaces
def test_a_read_only_mount_runs_queries_from_the_cache_with_one_warning(tmp_path: Path) -> None:
    mount = tmp_path / "ro"
    mount.mkdir()
    expected = [list(r) for r in _query(None, 40)]
    proc = _in_namespace(tmp_path, f"""
        $CHILD {mount}/c.sqlite 16 > /dev/null
        mount --bind {mount} {mount} && mount -o remount,ro,bind {mount} {mount}
        touch {mount}/probe 2>/dev/null && exit 3
        $CHILD {mount}/c.sqlite 40
    """)  # fmt: skip
    got = _result(proc)
    assert got["rows"] == expected and got["again"] is True
    assert got["hits"] == 16 and got["mode"] == "read-only"  # the cached answers still serve
    assert proc.stderr.count(WARNING) == 1, proc.stderr[-3000:]
    assert "OSError" not in proc.stderr and "damaged" not in proc.stderr


@pytest.mark.integration
@needs_namespaces
def test_a_cache_path_on_a_read_only_mount_that_has_no_file_runs_uncached(
    tmp_path: Path,
) -> None:
    mount = tmp_path / "ro"
    mount.mkdir()
    expected = [list(r) for r in _query(None, 24)]
    proc = _in_namespace(tmp_path, f"""
        mount --bind {mount} {mount} && mount -o remount,ro,bind {mount} {mount}
        $CHILD {mount}/sub/c.sqlite 24
    """)  # fmt: skip
    got = _result(proc)
    assert got["rows"] == expected and got["hits"] == 0 and got["mode"] == "off"
    assert proc.stderr.count(WARNING) == 1, proc.stderr[-3000:]


@pytest.mark.integration
@needs_namespaces
def test_a_real_full_disk_returns_the_answers_with_one_warning(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    expected = [list(r) for r in _query(None, 400)]
    proc = _in_namespace(tmp_path, f"""
        mount -t tmpfs -o size=512k tmpfs {disk}
        $CHILD {disk}/c.sqlite 16 > /dev/null
        dd if=/dev/zero of={disk}/filler bs=4k 2>/dev/null || true
        $CHILD {disk}/c.sqlite 400
    """)  # fmt: skip
    got = _result(proc)
    assert got["rows"] == expected and got["again"] is True and got["hits"] == 16
    assert got["mode"] == "read-only"
    assert proc.stderr.count(WARNING) == 1, proc.stderr[-3000:]
    assert "full" in proc.stderr
