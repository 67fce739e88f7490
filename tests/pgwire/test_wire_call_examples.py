"""``examples :=`` and ``batch_size :=`` through the wire server, from psycopg: planned and
prepared statements take them, EXPLAIN SEMANTIC VERBOSE shows them in the prompt, and a bad
shape is an error naming the expected form."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from conftest import make_db, wire_server

pytestmark = pytest.mark.integration

LOVELY = "examples := [{'input': 'lovely', 'output': 'yes'}, {'input': 'awful', 'output': 'no'}]"


def test_examples_and_batch_size_over_the_wire(tmp_path: Path) -> None:
    db = make_db(tmp_path / "sem.duckdb")
    with (
        wire_server(db, "--backend", "test:?yes_if=good") as server,
        psycopg.connect(server.dsn(), autocommit=True) as client,
    ):
        plain = client.execute(
            "SELECT id FROM reviews WHERE sem_filter('{text}') ORDER BY id"
        ).fetchall()
        given = client.execute(
            f"SELECT id FROM reviews WHERE sem_filter('{{text}}', {LOVELY}, batch_size := 1) "
            "ORDER BY id",
            prepare=True,
        ).fetchall()
        assert given == plain and plain  # the test: backend's answer is the row's, not the prompt's
        explained = "\n".join(
            str(r[0])
            for r in client.execute(
                f"EXPLAIN SEMANTIC VERBOSE SELECT id FROM reviews WHERE sem_filter('{{text}}', "
                f"{LOVELY}, batch_size := 1)"
            ).fetchall()
        )
        assert "batch_size := 1" in explained and "Input: lovely" in explained
        with pytest.raises(psycopg.Error) as bad:
            client.execute("SELECT id FROM reviews WHERE sem_filter('{text}', examples := ['x'])")
        assert "examples := [{'input': 'Great fun', 'output': 'yes'}" in str(bad.value)
