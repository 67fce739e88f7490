"""The peers' functions with their own arguments (Snowflake Cortex, BigQuery, Flock).

Each case quotes the example from that system's documentation, adapted to a small table, and
checks both what the call becomes (the rewrite, and EXPLAIN SEMANTIC's operator) and the rows
the deterministic ``test:`` backend gives for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.backends.sim.embeddings import SimEmbedder
from duckdb_sem.errors import BindError
from duckdb_sem.surface.peers import rewrite_peers

REVIEWS = (
    "SELECT * FROM (VALUES (1, 'Wow... Loved this place.', 'travel'), "
    "(2, 'Crust is not good.', 'cooking'), (3, 'Mixed feelings: a positive start', 'travel')) "
    "t(id, review, topic)"
)


@pytest.fixture
def con() -> Iterator[duckdb_sem.SemConnection]:
    c = duckdb_sem.connect(backend=RuleBackend(yes_if=["loved"]), cache="off",
                           embed_backend=SimEmbedder(dims=8))  # fmt: skip
    c.execute("CREATE TABLE reviews AS " + REVIEWS)
    yield c
    c.close()


def _explained(con: duckdb_sem.SemConnection, sql: str) -> str:
    """The plan's operator lines (``SemMap __sem_map_1 := sem_classify(...)``), one string."""
    plan = con.explain_semantic(sql)
    assert "road: planned by the optimizer" in plan
    return "\n".join(
        line.split(":= ")[-1] if "SemMap" in line else line for line in plan.splitlines()
    )


# -- Snowflake Cortex --------------------------------------------------------------------------
def test_snowflake_ai_filter_with_prompt(con: duckdb_sem.SemConnection) -> None:
    # docs: SELECT * FROM reviews WHERE AI_FILTER(PROMPT('The reviewer enjoyed the restaurant: {0}', review));
    sql = "SELECT id FROM reviews WHERE AI_FILTER(PROMPT('The reviewer enjoyed the restaurant: {0}', review))"
    assert rewrite_peers(sql) == (
        "SELECT id FROM reviews WHERE sem_filter('The reviewer enjoyed the restaurant: {0}', review)"
    )
    assert "SemFilter sem_filter('The reviewer enjoyed the restaurant: {0}'" in _explained(con, sql)
    assert con.sql(sql).fetchall() == [(1,)]


def test_snowflake_ai_filter_with_concat_runs_on_the_udf_path(
    con: duckdb_sem.SemConnection,
) -> None:
    # docs: WHERE AI_FILTER(CONCAT('The reviewer enjoyed the restaurant: ', review))
    sql = "SELECT id FROM reviews WHERE AI_FILTER(CONCAT('The reviewer enjoyed the restaurant: ', review))"
    assert "sem_filter('{0}', CONCAT(" in rewrite_peers(sql)
    assert con.sql(sql).fetchall() == [(1,)]


def test_snowflake_ai_filter_in_a_join_is_a_semantic_join(con: duckdb_sem.SemConnection) -> None:
    # docs: SELECT * FROM reviews r JOIN products p ON AI_FILTER(PROMPT('Review {0} is about product {1}', r.review, p.name))
    con.execute("CREATE TABLE topics AS SELECT * FROM (VALUES ('travel'), ('cooking')) t(name)")
    sql = (
        "SELECT r.id, p.name FROM reviews r JOIN topics p "
        "ON AI_FILTER(PROMPT('Review {0} is about {1}', r.review, p.name)) ORDER BY 1, 2"
    )
    assert "SemJoin sem_join('Review {0} is about {1}', r.review, p.name)" in _explained(con, sql)
    assert con.sql(sql).fetchall() == [(1, "cooking"), (1, "travel")]


def test_snowflake_ai_classify_single_multi_and_described(con: duckdb_sem.SemConnection) -> None:
    # docs: SELECT AI_CLASSIFY('One day I will see the world', ['travel', 'cooking']);
    single = "SELECT id, AI_CLASSIFY(topic, ['travel', 'cooking']) AS c FROM reviews ORDER BY id"
    assert "struct_pack(labels := [sem_classify(" in rewrite_peers(single)
    assert "sem_classify('Classify into one of: travel; cooking.\\nText: {0}'" in _explained(
        con, single
    )
    assert con.sql(single).fetchall() == [
        (1, {"labels": ["travel"]}),
        (2, {"labels": ["cooking"]}),
        (3, {"labels": ["travel"]}),
    ]
    # docs: AI_CLASSIFY(..., [{'label': 'travel', 'description': ...}, ...], {'output_mode': 'multi'})
    multi = (
        "SELECT AI_CLASSIFY(review, [{'label': 'travel', 'description': 'places you loved'}, "
        "{'label': 'cooking', 'description': 'food preparation'}], {'output_mode': 'multi'}) AS c "
        "FROM reviews ORDER BY id"
    )
    # test: says yes when the prompt has 'loved': one decision per label, so travel for all
    assert [r[0]["labels"] for r in con.sql(multi).fetchall()] == [["travel", "cooking"],
                                                                   ["travel"], ["travel"]]  # fmt: skip


def test_snowflake_ai_complete_model_rule() -> None:
    fast = RuleBackend(yes_if=["x"])
    c = duckdb_sem.connect(backend=RuleBackend(), models={"fast": fast}, cache="off")
    c.execute("CREATE TABLE reviews AS " + REVIEWS)
    # docs: SELECT AI_COMPLETE('llama3.1-8b', CONCAT('Critique this review in bullet points: <review>', content, '</review>'))
    sql = "SELECT AI_COMPLETE('fast', PROMPT('Critique this review in bullet points: <review>{0}</review>', review)) FROM reviews ORDER BY id"
    assert rewrite_peers(sql, models=["default", "fast"]).startswith(
        "SELECT sem_map('Critique this review in bullet points: <review>{0}</review>', review, "
        "model := 'fast')"
    )
    got = c.sql(sql).fetchall()
    assert got[0][0].startswith("Critique this review")
    assert fast.calls == 3  # the named model answered
    # a peer catalogue name is not a model here: the connection's own backend answers
    other = sql.replace("'fast'", "'llama3.1-8b'")
    assert "model :=" not in rewrite_peers(other, models=["default", "fast"])
    assert c.sql(other).fetchall() == got
    c.close()


def test_snowflake_ai_agg_and_summarize_agg(con: duckdb_sem.SemConnection) -> None:
    # docs: SELECT AI_AGG(review, 'Summarize the reviews') FROM reviews;
    sql = "SELECT topic, AI_AGG(review, 'Summarize the reviews') AS s FROM reviews GROUP BY topic ORDER BY topic"
    assert "sem_agg('Summarize the reviews: {0}', review)" in rewrite_peers(sql)
    assert "SemAgg" in _explained(con, sql)
    ours = "SELECT topic, sem_agg('Summarize the reviews: {review}') AS s FROM reviews GROUP BY topic ORDER BY topic"
    assert con.sql(sql).fetchall() == con.sql(ours).fetchall()
    # docs: SELECT AI_SUMMARIZE_AGG(churn_reason) FROM customers;
    summary = con.sql("SELECT AI_SUMMARIZE_AGG(review) FROM reviews").fetchall()
    assert (
        summary
        == con.sql("SELECT sem_agg('Summarize these texts: {review}') FROM reviews").fetchall()
    )


def test_snowflake_ai_sentiment(con: duckdb_sem.SemConnection) -> None:
    # docs: SELECT AI_SENTIMENT('A tourist''s delight, ...');
    sql = "SELECT id, AI_SENTIMENT(review) FROM reviews ORDER BY id"
    assert (
        "sem_classify('The sentiment of: {0}', ['positive', 'negative', 'neutral', 'mixed'], review)"
        in rewrite_peers(sql)
    )
    rows = con.sql(sql).fetchall()
    assert rows[2] == (3, "positive")  # test: the first label the text names
    assert {r[1] for r in rows} <= {"positive", "negative", "neutral", "mixed"}


def test_snowflake_ai_embed_and_ai_similarity(con: duckdb_sem.SemConnection) -> None:
    # docs: SELECT AI_EMBED('snowflake-arctic-embed-l-v2.0', 'Snowflake is the AI Data Cloud');
    vector = con.sql("SELECT AI_EMBED('snowflake-arctic-embed-l-v2.0', review) AS v FROM reviews")
    assert vector.types[0] == "FLOAT[8]"
    assert len(vector.fetchall()) == 3
    # docs: SELECT AI_SIMILARITY('I like this dish', 'This dish is very good');
    ((same, other),) = con.sql(
        "SELECT AI_SIMILARITY('I like this dish', 'I like this dish'), "
        "AI_SIMILARITY('I like this dish', 'Crust is not good.')"
    ).fetchall()
    assert same == pytest.approx(1.0, abs=1e-6)
    assert other is not None and other < 0.99
    cos = con.sql(
        "SELECT array_cosine_similarity(sem_embed(review), sem_embed(review)) FROM reviews"
    ).fetchall()
    assert all(v == pytest.approx(1.0, abs=1e-6) for (v,) in cos)
    assert con.sql("SELECT sem_embed(NULL::VARCHAR)").fetchall() == [(None,)]


# -- BigQuery ----------------------------------------------------------------------------------
def test_bigquery_ai_if_dotted(con: duckdb_sem.SemConnection) -> None:
    # docs: WHERE AI.IF(('The following news story is about technology: ', body), connection_id => 'us.example_connection')
    sql = "SELECT id FROM reviews WHERE AI.IF(('The reviewer loved it: ', review), connection_id => 'us.example_connection')"
    assert (
        rewrite_peers(sql)
        == "SELECT id FROM reviews WHERE sem_filter('The reviewer loved it: {0}', review)"
    )
    assert "SemFilter" in _explained(con, sql)
    # 'loved' is in the template: every row says yes
    assert con.sql(sql + " ORDER BY id").fetchall() == [(1,), (2,), (3,)]
    assert con.sql("SELECT id FROM reviews WHERE ai.if(('Q: ', review))").fetchall() == [(1,)]


def test_bigquery_ai_classify_and_score(con: duckdb_sem.SemConnection) -> None:
    # docs: AI.CLASSIFY(body, categories => ['tech', 'sport', 'business', ...], connection_id => ...)
    sql = "SELECT id, AI.CLASSIFY(topic, categories => ['travel', 'cooking'], connection_id => 'c') FROM reviews ORDER BY id"
    assert con.sql(sql).fetchall() == [(1, "travel"), (2, "cooking"), (3, "travel")]
    # docs: AI.SCORE(('On a scale from 1 to 10, how enthusiastic is this review? ', review)) ... ORDER BY ... LIMIT
    score = "SELECT id, AI.SCORE(('On a scale from 1 to 10, how enthusiastic is this review? ', review)) AS s FROM reviews ORDER BY s DESC LIMIT 1"
    assert (
        "sem_map('On a scale from 1 to 10, how enthusiastic is this review? {0}\nAnswer with a number only.', review, 'DOUBLE')"
        in rewrite_peers(score)
    )
    (top,) = con.sql(score).fetchall()
    assert top[0] == 3 and isinstance(top[1], float)  # test: a number is the prompt's length


def test_bigquery_ai_generate_result_and_output_schema(con: duckdb_sem.SemConnection) -> None:
    # docs: SELECT city, AI.GENERATE(('Give a short, one sentence description of ', city), connection_id => ...).result
    sql = "SELECT AI.GENERATE(('Give a short, one sentence description of ', topic), connection_id => 'c') AS g FROM reviews ORDER BY id"
    rows = con.sql(sql).fetchall()
    assert rows[0][0]["result"].startswith("Give a short")
    # docs: AI.GENERATE(..., output_schema => 'population INT64, landmark STRING')
    typed = "SELECT AI.GENERATE(('Describe ', topic), output_schema => 'population INT64, landmark STRING') AS g FROM reviews"
    assert "'STRUCT(population BIGINT, landmark VARCHAR)'" in rewrite_peers(typed)
    row = con.sql(typed).fetchall()[0]
    assert set(row[0]) == {"population", "landmark"}


# -- Flock -------------------------------------------------------------------------------------
def test_flock_filter_complete_reduce(con: duckdb_sem.SemConnection) -> None:
    # docs: WHERE llm_filter({'model_name': 'gpt-4o'}, {'prompt': 'Is this product eco-friendly?', 'context_columns': [{'data': product_description}]})
    sql = ("SELECT id FROM reviews WHERE llm_filter({'model_name': 'gpt-4o'}, "
           "{'prompt': 'Is this review enthusiastic?', 'context_columns': [{'data': review}]})")  # fmt: skip
    assert rewrite_peers(sql) == (
        "SELECT id FROM reviews WHERE sem_filter('Is this review enthusiastic?\n{0}', review)"
    )
    assert "SemFilter" in _explained(con, sql)
    assert con.sql(sql).fetchall() == [(1,)]
    # docs: llm_complete({'model_name': 'gpt-4o'}, {'prompt': 'Generate a product description', 'context_columns': [{'data': product_name}]})
    named = ("SELECT llm_complete({'model_name': 'gpt-4o'}, {'prompt': 'Summarize', "
             "'context_columns': [{'data': review, 'name': 'review'}]}) FROM reviews ORDER BY id")  # fmt: skip
    assert "sem_map('Summarize\nreview: {0}', review)" in rewrite_peers(named)
    assert con.sql(named).fetchall()[0][0].startswith("Summarize")
    # docs (Flock 0.2): llm_reduce({'model_name': 'gpt-4'}, {'prompt': 'Summarize'}, {'text': text})
    legacy = "SELECT llm_reduce({'model_name': 'gpt-4'}, {'prompt': 'Summarize'}, {'text': review}) FROM reviews"
    assert rewrite_peers(legacy) == "SELECT sem_agg('Summarize\ntext: {0}', review) FROM reviews"
    assert "SemAgg" in _explained(con, legacy)


def test_flock_first_last_rerank(con: duckdb_sem.SemConnection) -> None:
    # docs: SELECT llm_first({'model_name': 'gpt-4o'}, {'prompt': 'Which product is most suitable for beginners?', 'context_columns': [{'data': product_name}]}) FROM products
    args = ("{'model_name': 'gpt-4o'}, {'prompt': 'Which review is most detailed?', "
            "'context_columns': [{'data': review}]}")  # fmt: skip
    ((first, last, ranked),) = con.sql(
        f"SELECT llm_first({args}), llm_last({args}), llm_rerank({args}) FROM reviews"
    ).fetchall()
    # test: the score is the prompt's length, so the longest review is first
    assert first == '["Mixed feelings: a positive start"]'
    assert last == '["Crust is not good."]'
    assert [str(r) for r in ranked] == [first, '["Wow... Loved this place."]', last]


def test_flock_embedding(con: duckdb_sem.SemConnection) -> None:
    # docs: SELECT llm_embedding({'model_name': 'text-embedding-3-small'}, {'context_columns': [{'data': product_description}]})
    sql = ("SELECT llm_embedding({'model_name': 'text-embedding-3-small'}, "
           "{'context_columns': [{'data': review}]}) AS v FROM reviews")  # fmt: skip
    assert rewrite_peers(sql) == "SELECT sem_embed(review) AS v FROM reviews"
    assert con.sql(sql).types[0] == "FLOAT[8]"


# -- what stays, what fails --------------------------------------------------------------------
def test_our_own_arguments_are_left_to_the_aliases() -> None:
    for sql in (
        "SELECT ai_filter('{text} is spam') FROM t",
        "SELECT ai_complete('{text} gist', 'INTEGER') FROM t",
        "SELECT llm_filter('Is it? {text}') FROM t",
        "SELECT ai_agg('Sum up {text}') FROM t",
        "SELECT 'AI_FILTER(PROMPT(x))', \"ai_filter\"(1), t.ai_classify(1) FROM t",
    ):
        assert rewrite_peers(sql) == sql
    nested = "SELECT ai_filter('{0} is upbeat', AI_COMPLETE('m', PROMPT('Gist {0}', text))) FROM t"
    assert rewrite_peers(nested) == (
        "SELECT ai_filter('{0} is upbeat', sem_map('Gist {0}', text)) FROM t"
    )


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "SELECT AI_CLASSIFY(review, ['only']) FROM reviews",
            "AI_CLASSIFY: the categories must be a list of at least two",
        ),
        (
            "SELECT AI_CLASSIFY(review, ['a', 'b'], {'output_mode': 'many'}) FROM reviews",
            "output_mode is 'single' or 'multi'",
        ),
        (
            "SELECT llm_filter({'model_name': 'm'}, {'prompt_name': 'p'}) FROM reviews",
            "named prompts (CREATE PROMPT) do not exist",
        ),
        (
            "SELECT AI.SCORE(('x', review), model_params => '{}') FROM reviews",
            "AI.SCORE: model_params is not supported",
        ),
        (
            "SELECT AI_FILTER(PROMPT('Is {text} spam?', review)) FROM reviews",
            "PROMPT() numbers its fields",
        ),
        (
            "SELECT AI_SENTIMENT(review, ['price']) FROM reviews",
            "aspect categories are not supported",
        ),
        (
            "SELECT id FROM reviews WHERE AI_FILTER(PROMPT('Q {0}', review), model := 'x')",
            "unknown named argument 'model'",
        ),
        ("SELECT AI.IF(('Q ', review), 'extra') FROM reviews", "AI.IF: takes at most 1 argument"),
        (
            "SELECT llm_first({'model_name': 'm'}, {'prompt': 'Best?'}) FROM reviews",
            "llm_first: no context columns given",
        ),
    ],
)
def test_wrong_peer_arguments_say_what_to_write(
    con: duckdb_sem.SemConnection, sql: str, message: str
) -> None:
    with pytest.raises(BindError, match="in duckdb-sem: ") as err:
        con.sql(sql).fetchall()
    assert message in str(err.value)


def test_install_has_the_macro_shaped_peers() -> None:
    db = duckdb.connect()
    duckdb_sem.install(db, backend=RuleBackend(yes_if=["loved"]), cache="off",
                       embed_backend=SimEmbedder(dims=8))  # fmt: skip
    db.execute("CREATE TABLE reviews AS " + REVIEWS)
    assert db.sql("SELECT AI_SENTIMENT(review) FROM reviews WHERE id = 3").fetchall() == [
        ("positive",)
    ]
    assert db.sql("SELECT ai_summarize_agg(review) FROM reviews").fetchall()[0][0]
    assert db.sql("SELECT ai_similarity('a b', 'a b')").fetchall() == [(pytest.approx(1.0),)]
    assert db.sql("SELECT ai_embed('m', review) FROM reviews").types[0] == "FLOAT[8]"
    db.close()


def test_sem_embed_is_cached_on_disk_and_counted(tmp_path: Path) -> None:
    for run in range(2):
        c = duckdb_sem.connect(backend=RuleBackend(), cache=str(tmp_path / "cache.db"),
                               embed_backend=SimEmbedder(dims=8))  # fmt: skip
        c.execute("CREATE TABLE t AS SELECT * FROM (VALUES ('good a'), ('bad b'), ('good a')) v(x)")
        assert len(c.sql("SELECT sem_embed(x) FROM t").fetchall()) == 3
        stats = c.stats()
        assert stats.embed_calls == 3  # virtual: every text asked
        assert (stats.embed_physical_calls, stats.embed_cache_hits) == (
            (2, 0) if run == 0 else (0, 2)
        )
        c.close()


def test_relation_api_reads_a_peer_call(con: duckdb_sem.SemConnection) -> None:
    rel = con.table("reviews").filter("AI_FILTER(PROMPT('Q {0}', review))")
    assert [r[0] for r in rel.fetchall()] == [1]


@pytest.mark.model
@pytest.mark.slow
def test_sem_embed_with_the_embedded_minilm() -> None:
    c = duckdb_sem.connect(backend=RuleBackend(), cache="off")  # the default embedder: MiniLM
    rel = c.sql(
        "SELECT sem_embed('a dog') AS v, AI_SIMILARITY('a dog', 'a puppy') AS near, "
        "AI_SIMILARITY('a dog', 'tax law') AS far"
    )
    assert rel.types[0] == "FLOAT[384]"
    ((_, near, far),) = rel.fetchall()
    assert near > far
    c.close()


_BOTH_ROADS = [
    "SELECT id FROM reviews WHERE AI_FILTER(PROMPT('Q: {0}', review)) ORDER BY id",
    "SELECT id, AI_CLASSIFY(topic, ['travel', 'cooking']) FROM reviews ORDER BY id",
    "SELECT id, AI_SENTIMENT(review) FROM reviews ORDER BY id",
    "SELECT topic, AI_AGG(review, 'Sum up') FROM reviews GROUP BY topic ORDER BY topic",
    "SELECT id, AI.SCORE(('Rate ', review)) FROM reviews ORDER BY id",
    "SELECT id, AI.GENERATE(('Gist of ', review)).result FROM reviews ORDER BY id",
    "SELECT llm_first({'model_name': 'm'}, {'prompt': 'Best?', 'context_columns': [{'data': review}]}) FROM reviews",
]


@pytest.mark.parametrize("sql", _BOTH_ROADS)
def test_the_udf_road_answers_as_the_planned_one(con: duckdb_sem.SemConnection, sql: str) -> None:
    plain = duckdb_sem.connect(backend=RuleBackend(yes_if=["loved"]), cache="off", optimize=False)
    plain.execute("CREATE TABLE reviews AS " + REVIEWS)
    assert plain.sql(sql).fetchall() == con.sql(sql).fetchall()
    plain.close()


def test_a_prompt_without_columns_is_its_own_value(con: duckdb_sem.SemConnection) -> None:
    # docs: SELECT AI_COMPLETE('snowflake-arctic', 'What are large language models?');
    sql = "SELECT AI_COMPLETE('snowflake-arctic', 'What are large language models?')"
    assert rewrite_peers(sql) == "SELECT sem_map('{0}', 'What are large language models?')"
    assert con.sql(sql).fetchall() == [("What are large language models?",)]
    # docs: SELECT AI_CLASSIFY('One day I will see the world', ['travel', 'cooking']);
    got = con.sql("SELECT AI_CLASSIFY('One day I will travel the world', ['travel', 'cooking'])")
    assert got.fetchall() == [({"labels": ["travel"]},)]
    # docs: SELECT llm_complete({'model_name': 'gpt-4o'}, {'prompt': 'Explain the purpose of Flock.'})
    flock = "SELECT llm_complete({'model_name': 'gpt-4o'}, {'prompt': 'Explain the purpose of {Flock}.'})"
    assert rewrite_peers(flock) == "SELECT sem_map('{0}', 'Explain the purpose of {Flock}.')"


def test_flock_model_name_selects_a_model_of_the_connection() -> None:
    fast = RuleBackend()
    c = duckdb_sem.connect(backend=RuleBackend(), models={"fast": fast}, cache="off")
    c.execute("CREATE TABLE reviews AS " + REVIEWS)
    sql = ("SELECT llm_complete({'model_name': 'FAST', 'model_parameters': {'temperature': 0.1}}, "
           "{'prompt': 'Gist', 'context_columns': [{'data': review}]}) FROM reviews")  # fmt: skip
    assert "model := 'fast', temperature := 0.1)" in rewrite_peers(sql, models=["default", "fast"])
    assert len(c.sql(sql).fetchall()) == 3 and fast.calls == 3
    c.close()
