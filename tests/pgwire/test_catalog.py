"""The catalog the tools people use read: psql's backslash commands, SQLAlchemy reflection."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
import sqlalchemy as sa
from conftest import WireProcess, wire_server

pytestmark = pytest.mark.integration


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[WireProcess]:
    path = tmp_path / "shop.duckdb"
    con = duckdb.connect(str(path))
    con.execute(
        "CREATE TABLE items (id INTEGER PRIMARY KEY, name VARCHAR NOT NULL, price DECIMAL(8,2))"
    )
    con.execute("CREATE INDEX items_price ON items (price)")
    con.execute("CREATE VIEW cheap AS SELECT id, name FROM items WHERE price < 10")
    con.close()
    with wire_server(path, "--backend", "test:") as proc:
        yield proc


def _psql(server: WireProcess, command: str) -> list[str]:
    out = subprocess.run(
        ["psql", "-X", "-h", "127.0.0.1", "-p", str(server.port), "-U", "tester",
         "-d", server.dbname, "-c", command],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert out.returncode == 0 and not out.stderr, (command, out.stderr)
    return [line.strip() for line in out.stdout.splitlines()]


def test_psql_describes_tables_views_databases_functions(shop: WireProcess) -> None:
    table = _psql(shop, r"\d items")
    assert table[0] == 'Table "main.items"'
    assert "id     | integer           |           | not null |" in table
    assert "name   | character varying |           | not null |" in table
    assert any(line.startswith('"items_price"') for line in table)
    assert 'Table "main.items"' in _psql(shop, r"\d+ items")
    assert _psql(shop, r"\d cheap")[0] == 'View "main.cheap"'
    assert any(line.startswith("shop ") for line in _psql(shop, r"\l"))
    assert "List of functions" in _psql(shop, r"\df")
    assert any(line.startswith("main ") for line in _psql(shop, r"\dn"))


def test_sqlalchemy_reflects_tables_keys_and_indexes(shop: WireProcess) -> None:
    engine = sa.create_engine(f"postgresql+psycopg://tester@127.0.0.1:{shop.port}/{shop.dbname}")
    try:
        items = sa.Table("items", sa.MetaData(), autoload_with=engine)
        assert [c.name for c in items.columns] == ["id", "name", "price"]
        assert [c.name for c in items.primary_key.columns] == ["id"]
        assert isinstance(items.c.price.type, sa.Numeric) and not items.c.name.nullable
        metadata = sa.MetaData()
        metadata.reflect(engine, views=True)
        assert sorted(metadata.tables) == ["cheap", "items"]
        inspector = sa.inspect(engine)
        assert inspector.get_pk_constraint("items")["name"] == "items_pkey"
        indexes = inspector.get_indexes("items")
        assert [(i["name"], i["column_names"], i["unique"]) for i in indexes] == [
            ("items_price", ["price"], False)
        ]
        with engine.connect() as conn:
            assert conn.execute(sa.select(sa.func.count()).select_from(items)).scalar() == 0
    finally:
        engine.dispose()
