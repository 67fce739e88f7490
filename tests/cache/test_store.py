from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from duckdb_sem.cache.store import LLMCache
from duckdb_sem.errors import ConfigError
from duckdb_sem.llm.request import Completion


def _completion(value: object, error: str | None = None) -> Completion:
    return Completion(value, str(value), 10, 2, score=0.5, error=error)


def test_round_trip_and_persistence(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    cache = LLMCache(path)
    cache.put_many({"a": _completion(True), "b": _completion({"x": [1, 2]})})
    cache.close()
    reopened = LLMCache(path)
    got = reopened.get_many(["a", "b", "missing"])
    assert got == {"a": _completion(True), "b": _completion({"x": [1, 2]})}
    assert len(reopened) == 2


def test_failed_completions_are_cached_unless_retrying_failures(tmp_path: Path) -> None:
    cache = LLMCache(tmp_path / "c.sqlite")
    bad = _completion(None, error="unparseable")
    cache.put_many({"bad": bad, "gone": _completion(None, error="aborted")})
    assert cache.get_many(["bad", "gone"]) == {"bad": bad}  # the final outcome, not an abort
    cache.close()
    retrying = LLMCache(tmp_path / "c.sqlite", retry_failures=True)
    assert retrying.get_many(["bad"]) == {}
    retrying.put_many({"bad": _completion(7)})
    assert retrying.get_many(["bad"]) == {"bad": _completion(7)}


def test_unwritable_path_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError, match="DUCKDB_SEM_CACHE"):
        LLMCache(blocker / "sub" / "cache.sqlite")


def _writer(path: str, start: int) -> None:
    cache = LLMCache(path)
    for i in range(start, start + 50):
        cache.put_many({f"k{i}": _completion(i)})


def test_several_processes_share_one_file(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.sqlite")
    LLMCache(path).close()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, n * 50)) for n in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    cache = LLMCache(path)
    assert len(cache) == 150
    assert cache.get_many(["k0", "k149"])["k149"].value == 149


def test_a_corrupted_page_is_a_clear_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    cache = LLMCache(path)
    cache.put_many({f"sig{i:05d}": _completion("x" * 200) for i in range(2000)})
    cache.close()
    data = bytearray(path.read_bytes())
    assert len(data) > 8 * 4096
    data[3 * 4096 : 6 * 4096] = b"\xff" * (3 * 4096)  # pages of the table's b-tree
    path.write_bytes(bytes(data))
    with pytest.raises(ConfigError) as err:
        reopened = LLMCache(path)
        reopened.get_many(f"sig{i:05d}" for i in range(2000))
        len(reopened)
    assert str(path) in str(err.value) and "delete it" in str(err.value)


def test_a_file_that_is_not_a_cache_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a database\n" * 1000)
    with pytest.raises(ConfigError, match="damaged or not a cache file"):
        LLMCache(path)
