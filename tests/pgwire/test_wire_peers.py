"""Over the wire: the peers' functions with their own arguments (surface/peers.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from conftest import make_db, wire_server

pytestmark = pytest.mark.integration


def test_peer_calls_through_psycopg(tmp_path: Path) -> None:
    db = make_db(tmp_path / "sem.duckdb")
    env = {"DUCKDB_SEM_EMBED_BACKEND": "sim-embed:?dims=16"}
    with (
        wire_server(db, "--backend", "test:?yes_if=good", env=env) as server,
        psycopg.connect(server.dsn(), autocommit=True) as conn,
    ):
        ours: list[Any] = conn.execute(
            "SELECT id FROM reviews WHERE sem_filter('Q: {text}') ORDER BY id"
        ).fetchall()
        assert ours
        for peer in (
            "AI_FILTER(PROMPT('Q: {0}', text))",
            "AI.IF(('Q: ', text), connection_id => 'us.c')",
            "llm_filter({'model_name': 'm'}, {'prompt': 'Q:', 'context_columns': [{'data': text}]})",
        ):
            got = conn.execute(f"SELECT id FROM reviews WHERE {peer} ORDER BY id").fetchall()
            assert got == ours, peer
        plan = [r[0] for r in conn.execute(
            "EXPLAIN SEMANTIC SELECT id FROM reviews WHERE AI.IF(('Q: ', text))"
        ).fetchall()]  # fmt: skip
        assert any("SemFilter sem_filter('Q: {0}', reviews.text)" in line for line in plan), plan
        (similar,) = conn.execute("SELECT AI_SIMILARITY('a b', 'a b')").fetchall()
        assert similar[0] == pytest.approx(1.0)
        with pytest.raises(psycopg.Error, match="AI_CLASSIFY: the categories must be a list"):
            conn.execute("SELECT AI_CLASSIFY(text, ['x']) FROM reviews")
