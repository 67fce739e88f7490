"""Security: SCRAM passwords, TLS, read-only mode, no file or setting access from SQL."""

from __future__ import annotations

import subprocess
from pathlib import Path

import psycopg
import pytest
from conftest import WireProcess, wire_server

pytestmark = pytest.mark.integration


def test_sql_cannot_reach_files_or_settings(server: WireProcess, tmp_path: Path) -> None:
    secret = tmp_path / "secret.csv"
    secret.write_text("a\n1\n")
    attempts = [
        f"SELECT * FROM read_csv('{secret}')",
        f"COPY (SELECT 1) TO '{tmp_path / 'out.csv'}'",
        f"ATTACH '{tmp_path / 'other.duckdb'}' AS other",
        "INSTALL httpfs",
    ]
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        for sql in attempts[:3]:
            with pytest.raises(psycopg.Error) as info:
                conn.execute(sql)
            assert info.value.sqlstate == "42501", (sql, info.value)
        with pytest.raises(psycopg.Error):
            conn.execute(attempts[3])
        # SET names PostgreSQL's settings, never DuckDB's (42704, as PostgreSQL answers a name
        # it does not know); DuckDB's own configuration is locked: files stay out of reach.
        with pytest.raises(psycopg.Error) as refused:
            conn.execute("SET enable_external_access = true")
        assert refused.value.sqlstate == "42704"
        with pytest.raises(psycopg.Error):
            conn.execute(f"SELECT * FROM read_csv('{secret}')")
    assert not (tmp_path / "out.csv").exists()


def test_allowed_directory_is_readable(db_file: Path, tmp_path: Path) -> None:
    allowed = tmp_path / "shared"
    allowed.mkdir()
    (allowed / "x.csv").write_text("a\n7\n")
    with (
        wire_server(db_file, "--backend", "test:", "--allow-dir", str(allowed)) as server,
        psycopg.connect(server.dsn(), autocommit=True) as conn,
    ):
        assert conn.execute(f"SELECT a FROM read_csv('{allowed / 'x.csv'}')").fetchone() == (7,)


def test_read_only_mode(db_file: Path) -> None:
    with (
        wire_server(db_file, "--backend", "test:", "--read-only") as server,
        psycopg.connect(server.dsn(), autocommit=True) as conn,
    ):
        assert conn.execute("SELECT count(*) FROM reviews").fetchone() == (4,)
        for sql in ("CREATE TABLE t (a INTEGER)", "DELETE FROM reviews", "DROP TABLE reviews"):
            with pytest.raises(psycopg.Error) as info:
                conn.execute(sql)
            assert info.value.sqlstate == "25006", (sql, info.value)


def test_scram_password_authentication(db_file: Path, tmp_path: Path) -> None:
    users = tmp_path / "users"
    users.write_text("# name:password\nalice:s3cret pass\n")
    with wire_server(db_file, "--backend", "test:", "--users", str(users)) as server:
        with psycopg.connect(server.dsn(user="alice", password="s3cret pass")) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        for user, password in (("alice", "wrong"), ("mallory", "s3cret pass")):
            with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
                psycopg.connect(server.dsn(user=user, password=password))


def test_tls(db_file: Path, tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    args = ("--backend", "test:", "--tls-cert", str(cert), "--tls-key", str(key), "--require-tls")
    with wire_server(db_file, *args) as server:
        with psycopg.connect(server.dsn(sslmode="require")) as conn:
            assert conn.pgconn.ssl_in_use
            assert conn.execute("SELECT count(*) FROM reviews").fetchone() == (4,)
        with pytest.raises(psycopg.OperationalError, match="TLS"):
            psycopg.connect(server.dsn(sslmode="disable"))
