"""A backend failure in the middle of a planned query surfaces as itself.

Cleanup after a failed SEU must not replace the real error with DuckDB's "connection has an
open result" (seen through the openai: backend in the LOTUS benchmark).
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.llm.request import Completion, LLMRequest


class _FailsLater(RuleBackend):
    def complete(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        if self.calls > 300:
            raise duckdb_sem.BackendTimeoutError("backend test: timed out (injected)")
        return super().complete(requests)


@pytest.mark.parametrize("how", ["sql", "execute"])
def test_backend_failure_is_not_masked_by_cleanup(how: str) -> None:
    con = duckdb_sem.connect(backend=_FailsLater(yes_if=["1"]), cache="off")
    con.execute("CREATE TABLE p AS SELECT i AS id, 'pkg ' || i AS text FROM range(3000) t(i)")
    sql = "SELECT id FROM p WHERE sem_filter('{text} a') AND sem_filter('{text} b')"
    with pytest.raises(duckdb_sem.BackendTimeoutError, match="injected"):
        (con.sql(sql) if how == "sql" else con.execute(sql)).fetchall()
    # the connection stays usable
    assert con.execute("SELECT count(*) FROM p").fetchall() == [(3000,)]
