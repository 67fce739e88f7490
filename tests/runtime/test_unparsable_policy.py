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
