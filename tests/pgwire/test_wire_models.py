"""Named models through the wire: SHOW MODELS, model := in a query, who may change the models.

The server's default backend says yes to rows with 'good'; its model ``bad`` (from
``DUCKDB_SEM_MODELS``) to rows with 'bad', so each call's rows show which backend answered it.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from conftest import make_db, wire_server

pytestmark = pytest.mark.integration

MODELS = {"DUCKDB_SEM_MODELS": "bad=test:?yes_if=bad"}


def test_models_over_the_wire(tmp_path: Path) -> None:
    db = make_db(tmp_path / "sem.duckdb")
    with (
        wire_server(db, "--backend", "test:?yes_if=good", env=MODELS) as server,
        psycopg.connect(server.dsn(), autocommit=True) as client,
    ):
        shown = client.execute("SHOW MODELS").fetchall()
        assert [(name, spec) for name, spec, _ in shown] == [
            ("default", "test:?yes_if=good"),
            ("bad", "test:?yes_if=bad"),
        ]
        assert shown[0][2] != shown[1][2]  # two identities: two caches, two schedulers
        by_model = client.execute(
            "SELECT id FROM reviews WHERE sem_filter('{text}', model := 'bad') ORDER BY id"
        ).fetchall()
        assert by_model == [(2,), (3,)]
        mixed = client.execute(
            "SELECT id FROM reviews WHERE sem_filter('{text}') "
            "AND sem_filter('{text}', model := 'bad') ORDER BY id",
            prepare=True,
        ).fetchall()
        assert mixed == [(3,)]
        mapped = client.execute(
            "SELECT sem_map('{text}', model := 'bad', max_tokens := 1) FROM reviews WHERE id = 2"
        ).fetchall()
        assert mapped == [("bad film",)]  # named arguments pass through Describe and Execute
        with pytest.raises(psycopg.Error) as unknown:
            client.execute("SELECT sem_filter('{text}', model := 'badd') FROM reviews")
        assert unknown.value.sqlstate == "42704"
        assert "did you mean 'bad'" in str(unknown.value)
        with pytest.raises(psycopg.Error) as refused:
            client.execute("CREATE MODEL other USING 'test:'")
        assert refused.value.sqlstate == "42501"
        assert "DUCKDB_SEM_MODELS" in str(refused.value)


def test_external_access_server_lets_clients_register_models(tmp_path: Path) -> None:
    db = make_db(tmp_path / "sem.duckdb")
    with (
        wire_server(db, "--backend", "test:?yes_if=good", "--external-access") as server,
        psycopg.connect(server.dsn(), autocommit=True) as first,
        psycopg.connect(server.dsn(), autocommit=True) as second,
    ):
        first.execute("CREATE MODEL dull USING 'test:?yes_if=dull'")
        rows = second.execute(
            "SELECT id FROM reviews WHERE sem_filter('{text}', model := 'dull')"
        ).fetchall()
        assert rows == [(4,)]  # the server's models are every session's
        first.execute("DROP MODEL dull")
        assert [r[0] for r in second.execute("SHOW MODELS").fetchall()] == ["default"]
