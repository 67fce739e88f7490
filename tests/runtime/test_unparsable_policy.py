"""One policy for answers that do not parse: NULL with a counted warning, and cached."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

import duckdb_sem
from duckdb_sem.backends.base import Backend, Capacity
from duckdb_sem.llm.request import Completion, LLMRequest

SQL = "SELECT sem_map('{0}', x, 'INTEGER') FROM (VALUES ('a'), ('b')) t(x)"


class _Garbled(Backend):
    """Answers every request with output that does not parse, and counts the calls."""

    spec = "garbled:"
    backend_id = "garbled"

    def __init__(self) -> None:
        self.calls = 0

    def complete(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        self.calls += len(requests)
        return [Completion(None, "???", 3, 1, error="expected a number, got '???'")] * len(requests)

    def capacity(self) -> Capacity:
        return Capacity(max_batch=8)

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def test_a_failed_answer_is_cached_and_still_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    backend = _Garbled()
    con = duckdb_sem.connect(backend=backend, cache=str(tmp_path / "c.sqlite"))
    assert con.sql(SQL).fetchall() == [(None,), (None,)]
    assert backend.calls == 2 and con.stats().null_outputs == 2
    caplog.clear()
    assert con.sql(SQL).fetchall() == [(None,), (None,)]
    assert backend.calls == 2  # the same model gives the same answer: not asked again
    assert con.stats().physical_calls == 0 and con.stats().null_outputs == 2
    assert "unparseable model output" in caplog.text
    con.close()


@pytest.mark.parametrize("how", ["option", "environment"])
def test_retry_failures_asks_again_for_cached_failures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    backend = _Garbled()
    path = str(tmp_path / "c.sqlite")
    first = duckdb_sem.connect(backend=backend, cache=path)
    assert first.sql(SQL).fetchall() == [(None,), (None,)]
    first.close()
    assert backend.calls == 2
    if how == "environment":
        monkeypatch.setenv("DUCKDB_SEM_RETRY_FAILURES", "1")
        con = duckdb_sem.connect(backend=backend, cache=path)
    else:
        con = duckdb_sem.connect(backend=backend, cache=path, retry_failures=True)
    assert con.sql(SQL).fetchall() == [(None,), (None,)]
    assert backend.calls == 4  # the cached failures were asked again
    assert con.stats().physical_calls == 2
    con.close()
    # and the default still reuses them
    monkeypatch.delenv("DUCKDB_SEM_RETRY_FAILURES", raising=False)
    again = duckdb_sem.connect(backend=backend, cache=path)
    assert again.sql(SQL).fetchall() == [(None,), (None,)]
    assert backend.calls == 4
    again.close()
