"""The peers' calls with their own arguments in a plain DuckDB connection (``install(con)``).

Each case is a doc example of tests/surface/test_peers.py; it runs on ``install(con)`` and on
``connect()``, and both must give the same rows and ask the model the same requests (prefix,
rendered row, template pieces, output): the macros of ``surface/peer_macros.py`` compute what
``connect()``'s rewrite writes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import duckdb
import pytest

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.backends.sim.embeddings import SimEmbedder
from duckdb_sem.llm.request import Completion, LLMRequest
from duckdb_sem.surface.peer_prompts import flock_prompt, split_parts

REVIEWS = (
    "SELECT * FROM (VALUES (1, 'Wow... Loved this place.', 'travel'), "
    "(2, 'Crust is not good.', 'cooking'), (3, 'Mixed feelings: a positive start', 'travel')) "
    "t(id, review, topic)"
)
Asked = tuple[str, str, tuple[str, ...] | None, str, tuple[str, ...]]


class Recording(RuleBackend):
    """The rule backend, remembering what each request asked."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.asked: set[Asked] = set()

    def complete(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        for r in requests:
            pieces = None if r.template is None else tuple(r.template.pieces)
            self.asked.add((r.prefix, r.row, pieces, r.output.sql_type, tuple(r.output.labels)))
        return super().complete(requests)


class Roads:
    """One plain DuckDB connection with ``install`` and one ``connect()``, each its backend."""

    def __init__(self, models: dict[str, RuleBackend] | None = None) -> None:
        self.plain_backend = Recording(yes_if=["loved"])
        self.sem_backend = Recording(yes_if=["loved"])
        self.plain = duckdb.connect()
        duckdb_sem.install(self.plain, backend=self.plain_backend, cache="off",
                           embed_backend=SimEmbedder(dims=8), models=models)  # fmt: skip
        self.sem = duckdb_sem.connect(backend=self.sem_backend, cache="off",
                                      embed_backend=SimEmbedder(dims=8), models=models)  # fmt: skip
        for con in (self.plain, self.sem):
            con.execute("CREATE TABLE reviews AS " + REVIEWS)

    def close(self) -> None:
        self.plain.close()
        self.sem.close()


@pytest.fixture
def roads() -> Iterator[Roads]:
    r = Roads()
    yield r
    r.close()


FLOCK_ARGS = ("{'model_name': 'gpt-4o'}, {'prompt': 'Which review is most detailed?', "
              "'context_columns': [{'data': review}]}")  # fmt: skip
EXAMPLES = [
    # Snowflake Cortex
    "SELECT id FROM reviews WHERE AI_FILTER(PROMPT('The reviewer enjoyed the restaurant: {0}', "
    "review)) ORDER BY id",
    "SELECT id FROM reviews WHERE AI_FILTER(CONCAT('The reviewer enjoyed the restaurant: ', "
    "review)) ORDER BY id",
    "SELECT r.id, p.name FROM reviews r JOIN (VALUES ('travel'), ('cooking')) p(name) "
    "ON AI_FILTER(PROMPT('Review {0} is about {1}', r.review, p.name)) ORDER BY 1, 2",
    "SELECT id, AI_CLASSIFY(topic, ['travel', 'cooking']) AS c FROM reviews ORDER BY id",
    "SELECT AI_CLASSIFY(review, [{'label': 'travel', 'description': 'places you loved'}, "
    "{'label': 'cooking', 'description': 'food preparation'}], {'output_mode': 'multi'}) AS c "
    "FROM reviews ORDER BY id",
    "SELECT AI_CLASSIFY(review, ['travel', 'cooking'], {'task_description': 'Topic of a review'})"
    " FROM reviews ORDER BY id",
    "SELECT AI_CLASSIFY('One day I will travel the world', ['travel', 'cooking'])",
    "SELECT topic, AI_AGG(review, 'Summarize the reviews') AS s FROM reviews GROUP BY topic "
    "ORDER BY topic",
    "SELECT AI_SUMMARIZE_AGG(review) FROM reviews",
    "SELECT id, AI_SENTIMENT(review) FROM reviews ORDER BY id",
    "SELECT AI_COMPLETE('snowflake-arctic', 'What are large language models?')",
    "SELECT AI_COMPLETE('llama3.1-8b', PROMPT('Critique this review: <review>{0}</review>', "
    "review), {'temperature': 0.2, 'max_tokens': 30}) FROM reviews ORDER BY id",
    # BigQuery
    "SELECT id FROM reviews WHERE AI.IF(('The reviewer loved it: ', review), "
    "connection_id => 'us.example_connection') ORDER BY id",
    "SELECT id FROM reviews WHERE ai.if(('Q: ', review)) ORDER BY id",
    "SELECT id FROM reviews WHERE ai_if(('Q: ', review, ' {sic}')) ORDER BY id",
    "SELECT id, AI.CLASSIFY(topic, categories => ['travel', 'cooking'], connection_id => 'c') "
    "FROM reviews ORDER BY id",
    "SELECT id, AI.CLASSIFY(review, [('travel', 'places'), ('cooking', 'food')]) FROM reviews "
    "ORDER BY id",
    "SELECT id, AI.SCORE(('On a scale from 1 to 10, how enthusiastic is this review? ', review))"
    " AS s FROM reviews ORDER BY s DESC, id LIMIT 1",
    "SELECT AI.GENERATE(('Give a short, one sentence description of ', topic), "
    "connection_id => 'c') AS g FROM reviews ORDER BY id",
    "SELECT id, AI.GENERATE(('Gist of ', review)).result FROM reviews ORDER BY id",
    # Flock
    "SELECT id FROM reviews WHERE llm_filter({'model_name': 'gpt-4o'}, {'prompt': 'Is this "
    "review enthusiastic?', 'context_columns': [{'data': review}]}) ORDER BY id",
    "SELECT llm_complete({'model_name': 'gpt-4o'}, {'prompt': 'Summarize', 'context_columns': "
    "[{'data': review, 'name': 'review'}, {'data': topic, 'name': 't'}]}) FROM reviews ORDER BY id",
    "SELECT llm_complete({'model_name': 'gpt-4o'}, {'prompt': 'Explain the purpose of {Flock}.'})",
    "SELECT llm_complete({'model_name': 'm'}, {'prompt': 'Gist'}, {'text': review, 'n': id}) "
    "FROM reviews ORDER BY id",
    "SELECT llm_reduce({'model_name': 'gpt-4'}, {'prompt': 'Summarize'}, {'text': review}) "
    "FROM reviews",
    f"SELECT llm_first({FLOCK_ARGS}), llm_last({FLOCK_ARGS}), llm_rerank({FLOCK_ARGS}) "
    "FROM reviews",
    # our own arguments under the peers' names stay ours
    "SELECT id, ai_filter('{0} is great', review) FROM reviews ORDER BY id",
    "SELECT topic, ai_agg('Sum up {0}', review) FROM reviews GROUP BY topic ORDER BY topic",
    "SELECT id, llm_complete('Gist of {0}', review) FROM reviews ORDER BY id",
]


#: a string literal where the peer takes any text: a macro sees a value, not the literal, so it
#: asks the same words with the text as the template's value (connect() makes it the template)
LITERAL_INPUT = {"SELECT AI_CLASSIFY('One day I will travel the world', ['travel', 'cooking'])"}


def _words(asked: set[Asked]) -> set[Asked]:
    return {(prefix, row, None, kind, labels) for prefix, row, _, kind, labels in asked}


@pytest.mark.parametrize("sql", EXAMPLES)
def test_install_answers_as_connect(roads: Roads, sql: str) -> None:
    got = roads.plain.sql(sql).fetchall()
    assert got == roads.sem.sql(sql).fetchall()
    assert got  # every example gives rows
    plain, sem = roads.plain_backend.asked, roads.sem_backend.asked
    assert plain  # and asked the model
    assert (_words(plain), plain) == (_words(sem), plain if sql in LITERAL_INPUT else sem)


def test_embeddings_answer_as_connect(roads: Roads) -> None:
    for sql in (
        "SELECT llm_embedding({'model_name': 'm'}, {'context_columns': [{'data': review}]}) "
        "FROM reviews ORDER BY id",
        "SELECT AI_EMBED('snowflake-arctic-embed-l-v2.0', review) FROM reviews ORDER BY id",
    ):
        rel = roads.plain.sql(sql)
        assert rel.types[0] == "FLOAT[8]"
        assert rel.fetchall() == roads.sem.sql(sql).fetchall()


def test_a_peer_model_name_picks_the_connections_model() -> None:
    fast = Recording()
    r = Roads(models={"fast": fast})
    try:
        sql = ("SELECT AI_COMPLETE('fast', PROMPT('Critique {0}', review)), "
               "llm_complete({'model_name': 'FAST', 'model_parameters': {'temperature': 0.1}}, "
               "{'prompt': 'Gist', 'context_columns': [{'data': review}]}) FROM reviews")  # fmt: skip
        assert len(r.plain.sql(sql).fetchall()) == 3
        assert fast.calls == 6 and not r.plain_backend.asked  # the named model answered all
        r.plain.sql(
            "SELECT AI_COMPLETE('gpt-4o', PROMPT('Critique {0}', review)) FROM reviews"
        ).fetchall()
        assert len(r.plain_backend.asked) == 3  # a catalogue name: the connection's own
    finally:
        r.close()


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "SELECT AI.GENERATE(('Describe ', topic), output_schema => 'population INT64') "
            "FROM reviews",
            "AI.GENERATE: output_schema needs duckdb_sem.connect()",
        ),
        (
            "SELECT AI.CLASSIFY(topic, ['a', 'b'], output_mode => 'multi') FROM reviews",
            "returns a list, which needs duckdb_sem.connect()",
        ),
        (
            "SELECT AI.SCORE(('x', review), model_params => '{}') FROM reviews",
            "AI.SCORE: model_params is not supported",
        ),
        (
            "SELECT AI_CLASSIFY(review, ['a', 'b'], {'output_mode': 'many'}) FROM reviews",
            "output_mode is 'single' or 'multi'",
        ),
        (
            "SELECT llm_first({'model_name': 'm'}, {'prompt': 'Best?'}) FROM reviews",
            "llm_first: no context columns given",
        ),
    ],
)
def test_what_a_macro_cannot_do_says_what_to_write(roads: Roads, sql: str, message: str) -> None:
    with pytest.raises(duckdb.Error) as err:
        roads.plain.sql(sql).fetchall()
    assert message in str(err.value)
    assert not roads.plain_backend.asked  # before any LLM call


def test_tuple_parts_are_split_by_the_statements_text() -> None:
    sql = "SELECT AI.IF(('Is ', a, ' like ', b, '?')), ai.score(('Rate ', a)) FROM t"
    assert split_parts(sql, "ai.if", ["Is ", "x", " like ", "y", "?"]) == (
        "Is {0} like {1}?",
        ("x", "y"),
    )
    assert split_parts(sql, "ai.score", ["Rate ", "x"]) == ("Rate {0}", ("x",))
    # a column whose value equals a text part still fits; a statement without the call: values
    assert split_parts("SELECT 1", "ai.if", ["Rate ", "x"]) == ("{0}{1}", ("Rate ", "x"))
    assert split_parts("SELECT ai.if(('all text'))", "ai.if", ["all text"]) == (
        "{0}",
        ("all text",),
    )


def test_a_relation_built_in_python_still_answers(roads: Roads) -> None:
    rel = roads.plain.table("reviews").filter("AI.IF(('The reviewer loved it: ', review))")
    assert sorted(r[0] for r in rel.fetchall()) == [1, 2, 3]  # 'loved' is in every prompt
    rel = roads.plain.table("reviews").filter("AI_FILTER(PROMPT('Q {0}', review))")
    assert [r[0] for r in rel.fetchall()] == [1]


def test_a_read_only_database_has_the_rest(tmp_path: Path) -> None:
    path = str(tmp_path / "db.duckdb")
    with duckdb.connect(path) as con:
        con.execute("CREATE TABLE reviews AS " + REVIEWS)
    con = duckdb.connect(path, read_only=True)
    duckdb_sem.install(con, backend=RuleBackend(yes_if=["loved"]), cache="off")
    sql = "SELECT id FROM reviews WHERE ai_if(('Q ', review)) OR AI_FILTER(PROMPT('{0}', topic))"
    assert con.sql(sql).fetchall() == [(1,)]  # no ai catalog there: ai_if spells AI.IF
    con.close()


def test_connect_has_no_ai_catalog() -> None:
    con = duckdb_sem.connect(backend="test:", cache="off")
    assert "ai" not in {
        r[0] for r in con.sql("SELECT database_name FROM duckdb_databases()").fetchall()
    }
    con.close()


def test_a_users_own_database_named_ai_is_left_alone(tmp_path: Path) -> None:
    con = duckdb.connect()
    con.execute(f"ATTACH '{tmp_path / 'ai.duckdb'}' AS ai")
    duckdb_sem.install(con, backend=RuleBackend(yes_if=["loved"]), cache="off")
    assert con.sql("SELECT count(*) FROM duckdb_functions() WHERE database_name = 'ai'"
                   ).fetchall() == [(0,)]  # fmt: skip
    assert con.sql("SELECT ai_if(('Q ', 'loved'))").fetchall() == [(True,)]
    con.close()


def test_flock_prompt_is_connects_template_with_duckdbs_text() -> None:
    spec = {"prompt": "Gist {x}", "context_columns": [{"data": "a", "name": "x"}, {"data": 3}]}
    assert flock_prompt(spec, {"flag": True, "none": None}) == (
        "Gist {{x}}\nx: {0}\n{1}\nflag: {2}\nnone: {3}",
        ("a", "3", "true", None),
    )
    assert flock_prompt({"prompt": "Explain {Flock}"}) == ("{0}", ("Explain {Flock}",))
