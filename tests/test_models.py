"""Named models per call: each call's requests reach its own model's backend, on every entry.

Two rule backends with different identities stand for a fast and a big model; each records the
rows it was asked, so a test sees which operator's requests went where (and that the
connection's default backend was asked nothing).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import duckdb
import pytest

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.errors import BindError, ConfigError, UnknownModelError
from duckdb_sem.llm.request import Completion, LLMRequest

ROWS = "(1, 'a good film'), (2, 'good fun'), (3, 'plain fun'), (4, NULL), (5, 'dull')"


class Recording(RuleBackend):
    """A rule backend that keeps the rows it was asked."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.rows: list[str] = []

    def complete(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        self.rows += [r.row for r in requests]
        return super().complete(requests)


@pytest.fixture
def backends() -> dict[str, Recording]:
    return {
        "default": Recording(yes_if=["never"]),
        "fast": Recording(yes_if=["good"]),
        "big": Recording(yes_if=["fun"]),
    }


@pytest.fixture
def con(backends: dict[str, Recording], tmp_path: Path) -> Iterator[duckdb_sem.SemConnection]:
    c = duckdb_sem.connect(
        backend=backends["default"],
        cache=str(tmp_path / "c.sqlite"),
        models={"fast": backends["fast"], "big": backends["big"]},
    )
    c.execute(f"CREATE TABLE reviews AS SELECT * FROM (VALUES {ROWS}) t(id, text)")
    yield c
    c.close()


MIXED = (
    "SELECT id FROM reviews WHERE sem_filter('{text} :: check A', model := 'fast') "
    "AND sem_filter('{text} :: check B', model := 'big') ORDER BY id"
)


def _asked(backend: Recording) -> set[str]:
    return {row.split(" :: ")[-1] for row in backend.rows}


def test_identities_differ(con: duckdb_sem.SemConnection) -> None:
    ids = {m.name: m.backend_id for m in con.models.info()}
    assert sorted(ids) == ["big", "default", "fast"]
    assert len(set(ids.values())) == 3


@pytest.mark.parametrize("optimize", [True, False])
def test_each_operator_runs_on_its_model(
    backends: dict[str, Recording], tmp_path: Path, optimize: bool
) -> None:
    with duckdb_sem.connect(
        backend=backends["default"], cache="off", optimize=optimize,
        models={"fast": backends["fast"], "big": backends["big"]},
    ) as c:  # fmt: skip
        c.execute(f"CREATE TABLE reviews AS SELECT * FROM (VALUES {ROWS}) t(id, text)")
        assert c.sql(MIXED).fetchall() == [(2,)]
    assert backends["default"].rows == []
    assert _asked(backends["fast"]) == {"check A"} and backends["fast"].rows
    assert _asked(backends["big"]) == {"check B"} and backends["big"].rows


def test_install_explicit_form_takes_named_arguments(backends: dict[str, Recording]) -> None:
    raw = duckdb.connect()
    session = duckdb_sem.install(
        raw, backend=backends["default"], cache="off",
        models={"fast": backends["fast"], "big": backends["big"]},
    )  # fmt: skip
    raw.execute(f"CREATE TABLE reviews AS SELECT * FROM (VALUES {ROWS}) t(id, text)")
    rows = raw.sql(
        "SELECT id, sem_map('{0} in caps', text, max_tokens := 8, model := 'big') FROM reviews "
        "WHERE sem_filter('{0} :: check A', text, model := 'fast') ORDER BY id"
    ).fetchall()
    assert [r[0] for r in rows] == [1, 2]
    assert backends["default"].rows == []
    assert _asked(backends["fast"]) == {"check A"}
    assert {r.split(" in ")[-1] for r in backends["big"].rows} == {"caps"}
    typed = raw.sql(
        "SELECT sem_map_integer('{0}', text, model := 'big') FROM reviews WHERE id = 1"
    ).fetchall()
    assert typed == [(None,)] or isinstance(typed[0][0], int | None)
    assert backends["default"].rows == []
    with pytest.raises(duckdb.Error, match="unknown model 'bigg'; did you mean 'big'"):
        raw.sql("SELECT sem_filter('{0} x', text, model := 'bigg') FROM reviews").fetchall()
    session.release()
    raw.close()


def test_relation_api(con: duckdb_sem.SemConnection, backends: dict[str, Recording]) -> None:
    rel = con.table("reviews").sem_filter("{text} :: check A", model="fast")
    mapped = rel.sem_map("{text} in caps", name="caps", model="big", temperature=0.3)
    assert sorted(r[0] for r in mapped.fetchall()) == [1, 2]
    assert _asked(backends["fast"]) == {"check A"}
    assert {r.split(" in ")[-1] for r in backends["big"].rows} == {"caps"}
    assert backends["default"].rows == []
    with pytest.raises(UnknownModelError, match="unknown model 'huge'"):
        con.table("reviews").sem_filter("{text} x", model="huge")
    with pytest.raises(BindError, match="temperature := -1"):
        con.table("reviews").sem_map("{text} x", temperature=-1)


def test_temperature_is_part_of_the_cache_key(con: duckdb_sem.SemConnection) -> None:
    sql = "SELECT sem_map('{text} in caps', model := 'big', temperature := %s) FROM reviews"
    con.sql(sql % "0.2").fetchall()
    first = con.stats()
    assert first.physical_calls == 4 and first.cache_hits == 0
    con.sql(sql % "0.2").fetchall()
    assert con.stats().physical_calls == 0 and con.stats().cache_hits == 4
    con.sql(sql % "0.5").fetchall()
    assert con.stats().physical_calls == 4  # another temperature: asked again
    con.sql(sql.replace(", temperature := %s", ", max_tokens := 9")).fetchall()
    assert con.stats().physical_calls == 4


def test_the_same_call_on_two_models_is_cached_apart(
    con: duckdb_sem.SemConnection, backends: dict[str, Recording]
) -> None:
    fast = con.sql("SELECT id FROM reviews WHERE sem_filter('{text} ok', model := 'fast')")
    big = con.sql("SELECT id FROM reviews WHERE sem_filter('{text} ok', model := 'big')")
    assert sorted(fast.fetchall()) == [(1,), (2,)]
    assert sorted(big.fetchall()) == [(2,), (3,)]
    assert len(backends["fast"].rows) == len(backends["big"].rows) == 4


def test_unknown_model_fails_before_any_call(
    con: duckdb_sem.SemConnection, backends: dict[str, Recording]
) -> None:
    for optimize in (True, False):
        con.optimize = optimize
        with pytest.raises(UnknownModelError, match=r"did you mean 'fast'.*Valid: big, default"):
            con.sql("SELECT id FROM reviews WHERE sem_filter('{text} x', model := 'fats')")
    with pytest.raises(UnknownModelError):
        con.sql("SELECT * FROM sem_topk('reviews', 2, '{text} good', model := 'nope')")
    with pytest.raises(UnknownModelError):
        con.sql(
            "EXPLAIN SEMANTIC SELECT id FROM reviews WHERE sem_filter('{text} x', model := 'no')"
        )
    assert all(b.rows == [] for b in backends.values())


def test_decoding_options_on_a_decision_are_an_error(con: duckdb_sem.SemConnection) -> None:
    with pytest.raises(BindError, match="temperature do not apply to a yes/no decision"):
        con.sql("SELECT id FROM reviews WHERE sem_filter('{text} x', temperature := 0.5)")


def test_sql_create_show_drop(con: duckdb_sem.SemConnection) -> None:
    con.execute("CREATE MODEL dull_finder USING 'test:?yes_if=dull'")
    shown = con.sql("SHOW MODELS").fetchall()
    assert [r[0] for r in shown] == ["default", "big", "dull_finder", "fast"]
    assert shown[2][:2] == ("dull_finder", "test:?yes_if=dull")
    assert "dull" in shown[2][2]  # its identity carries its answer-changing options
    rows = con.sql("SELECT id FROM reviews WHERE sem_filter('{text} x', model := 'DULL_FINDER')")
    assert rows.fetchall() == [(5,)]
    with pytest.raises(ConfigError, match="already exists"):
        con.execute("CREATE MODEL dull_finder USING 'test:'")
    con.execute("CREATE MODEL IF NOT EXISTS dull_finder USING 'test:'")
    con.execute("CREATE OR REPLACE MODEL dull_finder USING 'test:?yes_if=film'")
    assert con.sql(
        "SELECT id FROM reviews WHERE sem_filter('{text} x', model := 'dull_finder')"
    ).fetchall() == [(1,)]
    con.execute("DROP MODEL dull_finder")
    con.execute("DROP MODEL IF EXISTS dull_finder")
    with pytest.raises(UnknownModelError):
        con.sql("SELECT id FROM reviews WHERE sem_filter('{text} x', model := 'dull_finder')")
    with pytest.raises(ConfigError, match="unknown backend"):
        con.execute("CREATE MODEL broken USING 'nosuch:'")
    with pytest.raises(ConfigError, match="'default' is the connection's own backend"):
        con.execute("CREATE MODEL default USING 'test:'")
    with pytest.raises(BindError, match="cannot read this model statement"):
        con.execute("CREATE MODEL x 'test:'")


def test_explain_shows_the_model_of_each_operator(con: duckdb_sem.SemConnection) -> None:
    text = "\n".join(r[0] for r in con.sql("EXPLAIN SEMANTIC VERBOSE " + MIXED).fetchall())
    assert "sem_filter('{0} :: check A', reviews.text, model := 'fast')" in text
    assert "sem_filter('{0} :: check B', reviews.text, model := 'big')" in text
    assert "models: big = test:" in text and "; fast = test:" in text
    assert "yes_if=('fun',)" in text  # the backend the big operator's prompt goes to


def test_cursor_keeps_the_models(
    con: duckdb_sem.SemConnection, backends: dict[str, Recording]
) -> None:
    child = con.cursor()
    assert child.sql(
        "SELECT id FROM reviews WHERE sem_filter('{text} x', model := 'big') ORDER BY id"
    ).fetchall() == [(2,), (3,)]
    child.close()
    assert backends["big"].rows  # and the parent still has it after the cursor closed
    assert con.sql(
        "SELECT count(*) FROM reviews WHERE sem_filter('{text} y', model := 'big')"
    ).fetchall() == [(2,)]


def test_environment_models_and_the_sidecar(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUCKDB_SEM_MODELS", "goodish=test:?yes_if=good")
    with duckdb_sem.connect(backend="test:", cache="off") as c:
        assert [m.name for m in c.models.info()] == ["default", "goodish"]
    monkeypatch.setenv("DUCKDB_SEM_MODELS", "nospec")
    with pytest.raises(ConfigError, match="not name=spec"):
        duckdb_sem.connect(backend="test:", cache="off")
    monkeypatch.delenv("DUCKDB_SEM_MODELS")
    with pytest.raises(ConfigError, match="named models run in this process"):
        duckdb_sem.connect(scheduler="http://127.0.0.1:9", models={"fast": "test:"})
