"""The peers' calls with their own arguments in a plain DuckDB connection (``install(con)``).

``connect()`` rewrites a peer call's text before DuckDB reads it (:mod:`.peers`); a plain
connection has no such step, so each peer call here is a TEMP macro that computes the same
``sem_*`` call from the peer's values: Snowflake's ``PROMPT('..{0}..', a)`` is a STRUCT of
template and values (:data:`~.peer_prompts.PROMPT_TYPE`) that ``AI_FILTER`` and ``AI_COMPLETE``
take by an overload of that type; Flock's model and prompt objects are read as JSON
(``to_json(m)->>'$.model_name'``; the prompt by ``Prompt.with_context``, in
:func:`~.peer_prompts.flock_udf`); BigQuery's ``AI.IF`` lives in an attached in-memory catalog
``ai`` whose macros call this connection's TEMP ones, and its tuple prompt is split by reading
the statement's text (:mod:`.peer_prompts`). A name that is also our alias (``ai_filter``,
``llm_complete``) keeps our arguments in an overload whose template is ``VARCHAR``.

Each macro's body is what :func:`~.peers.rewrite_peers` makes of the call, so both roads ask the
model the same words. What a macro cannot do raises an error naming ``connect()``:
``AI.GENERATE(..., output_schema => ...)`` and ``AI.CLASSIFY(..., output_mode => 'multi')``
(their answer type depends on an argument's value).

Example:
    ``AI_FILTER(PROMPT('Is {0} spam?', body))`` runs as
    ``__semudf_filter_s1(p.template, p.args, p.given, NULL, ...)`` where ``p`` is
    ``{'template': 'Is {0} spam?', 'args': [body::VARCHAR, ...], 'given': 1}``
"""

from __future__ import annotations

from dataclasses import dataclass

from duckdb_sem.surface.peer_args import literal
from duckdb_sem.surface.peer_prompts import PROMPT_TYPE
from duckdb_sem.surface.udf_sql import GIVEN, MAX_COLUMNS, OPTION_PARAMS, explicit_macro

__all__ = ["OVERLOADED", "PeerUdfs", "catalog_macros", "peer_macros"]

#: our aliases that the peer macros define (ours as one overload of each), not udfs.py
OVERLOADED = frozenset(
    {
        "ai_filter",
        "ai_complete",
        "ai_agg",
        "ai_if",
        "ai_generate",
        "llm_filter",
        "llm_complete",
        "llm_reduce",
    }
)
#: BigQuery's dotted functions: ai.<name> in the attached catalog -> its TEMP macro
_BIGQUERY = ("if", "score", "generate", "classify")
_BQ_NAMED = "connection_id := NULL, endpoint := NULL, model_params := NULL, request_type := NULL"
_COLUMNS = ", ".join(f"a{i}::VARCHAR" for i in range(MAX_COLUMNS))
_EMPTY = "NULL::VARCHAR, NULL::VARCHAR, NULL::VARCHAR, NULL::VARCHAR, NULL::BIGINT"


@dataclass(frozen=True, slots=True)
class PeerUdfs:
    """The session's UDFs (full names) that the peer macros call, and its model names."""

    filter: str
    map: str
    agg: str
    classify: str
    map_double: str
    map_boolean: str
    parts: str  # (statement, peer, parts) -> PROMPT_TYPE (:mod:`.peer_prompts`)
    flock: str  # (prompt object, columns object) as JSON -> PROMPT_TYPE
    embed: bool  # sem_embed exists (an embedding model is configured)
    models: tuple[str, ...] = ()  # the connection's named models (lower case)


def _options(model: str = "NULL", temperature: str = "NULL", max_tokens: str = "NULL") -> str:
    """A peer call's options as the UDF's last arguments (the peers set no others)."""
    return f"{model}::VARCHAR, {temperature}::DOUBLE, {max_tokens}::BIGINT, {_EMPTY}"


def _call(udf: str, prompt: str, *, lead: str = "", suffix: str = "", options: str = "") -> str:
    """``udf`` on a PROMPT_TYPE value ``prompt`` (an expression), ``lead`` before the
    template's own text and ``suffix`` after it (both escaped SQL strings)."""
    template = f"{prompt}.template"
    if lead:
        template = f"__sem_esc({lead}) || {template}"
    if suffix:
        template = f"{template} || __sem_esc({suffix})"
    return f"{udf}({template}, {prompt}.args, {prompt}.given, {options or _options()})"


def _helpers(udfs: PeerUdfs) -> list[tuple[str, str]]:
    known = ", ".join(literal(m) for m in udfs.models if m != "default")
    model = f"CASE WHEN lower(trim(n)) IN ({known}) THEN lower(trim(n)) END" if known else "NULL"
    text = "{'template': '{0}', 'args': [p], 'given': 1}"
    listed = "json_transform(to_json(p), '[\"VARCHAR\"]')"
    return [
        ("__sem_esc", "(x) AS replace(replace(x, '{', '{{'), '}', '}}')"),
        ("__sem_known", f"(n) AS {model}"),
        (
            "prompt",
            f"(t, {', '.join(f'a{i} := NULL' for i in range(MAX_COLUMNS))}) AS "
            f"{{'template': t, 'args': [{_COLUMNS}], 'given': {GIVEN}}}::{PROMPT_TYPE}",
        ),
        # BigQuery's prompt: a string is one value; a tuple is split by the statement's text
        (
            "__sem_bq_prompt",
            f"(p VARCHAR, peer) AS ({text})::{PROMPT_TYPE}, "
            f"(p, peer) AS {udfs.parts}(current_query(), peer, {listed})",
        ),
        # a label: 'a', {'label': 'a', 'description': 'd'} (Snowflake), ('a', 'd') (BigQuery)
        (
            "__sem_label",
            "(e) AS CASE json_type(e) WHEN 'VARCHAR' THEN e->>'$' "
            "WHEN 'ARRAY' THEN e->>'$[0]' ELSE e->>'$.label' END",
        ),
        (
            "__sem_described",
            "(e) AS __sem_label(e) || coalesce(': ' || CASE json_type(e) "
            "WHEN 'VARCHAR' THEN NULL WHEN 'ARRAY' THEN e->>'$[1]' "
            "ELSE e->>'$.description' END, '')",
        ),
        ("__sem_entries", "(c) AS json_transform(to_json(c), '[\"JSON\"]')"),
        ("__sem_labels", "(c) AS list_transform(__sem_entries(c), lambda e: __sem_label(e))"),
        # Flock: the context columns as JSON {'data': ..., 'name': ...}, Flock 0.2's columns
        # object {'name': column} after them
        (
            "__sem_flock_columns",
            "(p) AS coalesce(json_transform(to_json(p)->"
            "'$.context_columns', '[\"JSON\"]'), []::JSON[])",
        ),
        (
            "__sem_flock_ctx",
            "(p) AS __sem_flock_columns(p), "
            "(p, cols) AS list_concat(__sem_flock_columns(p), list_transform("
            "json_keys(to_json(cols)), lambda k: json_object('name', k, 'data', "
            "json_extract(to_json(cols), '$.\"' || k || '\"'))))",
        ),
        (
            "__sem_flock_prompt",
            f"(p) AS {udfs.flock}(to_json(p)::VARCHAR, NULL::VARCHAR), "
            f"(p, cols) AS {udfs.flock}(to_json(p)::VARCHAR, to_json(cols)::VARCHAR)",
        ),
        (
            "__sem_flock_model",
            "(m) AS __sem_known(coalesce(to_json(m)->>'$.model_name', "
            "to_json(m)->>'$.model'))::VARCHAR",
        ),
        (
            "__sem_flock_temperature",
            "(m) AS (to_json(m)->>'$.model_parameters.temperature')::DOUBLE",
        ),
        ("__sem_flock_max_tokens", "(m) AS (to_json(m)->>'$.model_parameters.max_tokens')::BIGINT"),
    ]


def _ours(name: str, target: str, wrap: str = "[{}]") -> str:
    """Our explicit form, with a ``VARCHAR`` template so the peer overloads can differ."""
    params, body = explicit_macro(target, wrap)
    return f"(t VARCHAR{params[1:]}) AS {body}"


def _snowflake(u: PeerUdfs) -> list[tuple[str, str]]:
    prompt = f"p {PROMPT_TYPE}"
    ours = f"t VARCHAR, {', '.join(f'a{i} := NULL' for i in range(MAX_COLUMNS))}, {OPTION_PARAMS}"
    rest_args = ("CAST(to_json(choices) AS VARCHAR), per_row, per_row_match, "
                 "CAST(to_json(examples) AS VARCHAR), batch_size")  # fmt: skip
    # AI_FILTER(text): one value, no template (a template names a {field}: ours)
    alone = f"({GIVEN} = 0 AND NOT contains(t, '{{'))"
    # AI_COMPLETE('model', 'prompt'): a model name is no template
    named = f"({GIVEN} = 1 AND NOT contains(t, '{{'))"
    # AI_AGG(text, 'instruction'): the group's texts are no template (ours: one template)
    group = "bool_and(contains(t, '{'))"
    single = (f"[{u.classify}(__sem_esc(lead || 'Classify into one of: ' || array_to_string("
              "list_transform(__sem_entries(c), lambda e: __sem_described(e)), '; ') || "
              f"'.\nText: ') || '{{0}}', __sem_labels(c), [i::VARCHAR], 1, {_options()})]")  # fmt: skip
    multi = (f"flatten(list_transform(__sem_entries(c), lambda e: CASE WHEN {u.map_boolean}("
             "__sem_esc(lead || 'Does the category ''' || __sem_described(e) || ''' apply to "
             f"this text? ') || '{{0}}', [i::VARCHAR], 1, {_options()}) THEN [__sem_label(e)] "
             "ELSE []::VARCHAR[] END))")  # fmt: skip
    return [
        (
            "ai_filter",
            f"({ours}) AS {u.filter}(CASE WHEN {alone} THEN '{{0}}' ELSE t END, "
            f"CASE WHEN {alone} THEN [t] ELSE [{_COLUMNS}] END, CASE WHEN {alone} "
            f"THEN 1 ELSE {GIVEN} END, model, temperature, max_tokens, {rest_args}), "
            f"({prompt}) AS {_call(u.filter, 'p')}",
        ),
        (
            "ai_complete",
            f"({ours}) AS {u.map}(CASE WHEN {named} THEN '{{0}}' ELSE t END, "
            f"[{_COLUMNS}], {GIVEN}, CASE WHEN {named} THEN __sem_known(t) ELSE "
            f"model END, temperature, max_tokens, {rest_args}), "
            f"(m VARCHAR, {prompt}) AS {_call(u.map, 'p', options=_options('__sem_known(m)'))}, "
            f"(m VARCHAR, {prompt}, o) AS "
            + _call(
                u.map,
                "p",
                options=_options(
                    "__sem_known(m)",
                    "(to_json(o)->>'$.temperature')",
                    "(to_json(o)->>'$.max_tokens')",
                ),
            ),
        ),
        (
            "ai_agg",
            f"({ours}) AS {u.agg}(CASE WHEN {group} THEN any_value(t) ELSE "
            f"__sem_esc(any_value(a0::VARCHAR)) || ': {{0}}' END, CASE WHEN {group} THEN "
            f"list([{_COLUMNS}]) ELSE list([t]) END, CASE WHEN {group} THEN "
            f"any_value({GIVEN}) ELSE 1 END, model, temperature, max_tokens, {rest_args})",
        ),
        (
            "__sem_classify_as",
            f"(i, c, lead, mode) AS CASE lower(mode) WHEN 'single' THEN "
            f"{{'labels': {single}}} WHEN 'multi' THEN {{'labels': {multi}}} "
            "ELSE error('AI_CLASSIFY: output_mode is ''single'' or ''multi'', "
            "got ' || mode) END",
        ),
        (
            "ai_classify",
            "(i, c) AS __sem_classify_as(i, c, '', 'single'), "
            "(i, c, cfg) AS __sem_classify_as(i, c, coalesce(to_json(cfg)->>"
            "'$.task_description' || '\n', ''), coalesce(to_json(cfg)->>"
            "'$.output_mode', 'single'))",
        ),
    ]


def _bigquery(u: PeerUdfs) -> list[tuple[str, str]]:
    def checked(peer: str, body: str) -> str:
        return (f"CASE WHEN model_params IS NOT NULL THEN error('{peer}: model_params is not "
                "supported; write temperature := / max_tokens := on the sem_* call') "
                f"ELSE {body} END")  # fmt: skip

    opts = _options("__sem_known(endpoint)")
    bq_if = _call(u.filter, "__sem_bq_prompt(p, 'ai.if')", options=opts)
    score = _call(u.map_double, "__sem_bq_prompt(p, 'ai.score')",
                  suffix="'\nAnswer with a number only.'", options=opts)  # fmt: skip
    generate = ("CASE WHEN output_schema IS NOT NULL THEN error('AI.GENERATE: output_schema "
                "needs duckdb_sem.connect(), which types the answer before DuckDB reads the "
                "statement; on install(con) write sem_map(''...{0}'', col) or AI.GENERATE "
                "without it') ELSE {'result': "
                + _call(u.map, "__sem_bq_prompt(p, 'ai.generate')", options=opts) + "} END")  # fmt: skip
    classify = (f"CASE WHEN categories IS NULL THEN error('AI.CLASSIFY: no categories given; "
                "write AI.CLASSIFY(text, [''a'', ''b''])') WHEN lower(coalesce(output_mode, "
                "'single')) <> 'single' THEN error('AI.CLASSIFY: output_mode => ''multi'' "
                "returns a list, which needs duckdb_sem.connect(); on install(con) write "
                "AI_CLASSIFY(text, [''a'', ''b''], {''output_mode'': ''multi''}).labels') ELSE "
                f"{u.classify}(__sem_esc('Classify into one of: ' || array_to_string("
                "list_transform(__sem_entries(categories), lambda e: __sem_described(e)), '; ') "
                f"|| '.\nText: ') || '{{0}}', __sem_labels(categories), [i::VARCHAR], 1, {opts}) "
                "END")  # fmt: skip
    return [
        ("ai_if", f"{_ours('ai_if', u.filter)}, (p, {_BQ_NAMED}) AS {checked('AI.IF', bq_if)}"),
        (
            "ai_generate",
            f"{_ours('ai_generate', u.map)}, (p, {_BQ_NAMED}, output_schema := "
            f"NULL) AS {checked('AI.GENERATE', generate)}",
        ),
        ("__sem_bq_if", f"(p, {_BQ_NAMED}) AS {checked('AI.IF', bq_if)}"),
        ("__sem_bq_score", f"(p, {_BQ_NAMED}) AS {checked('AI.SCORE', score)}"),
        (
            "__sem_bq_generate",
            f"(p, {_BQ_NAMED}, output_schema := NULL) AS {checked('AI.GENERATE', generate)}",
        ),
        (
            "__sem_bq_classify",
            f"(i, categories := NULL, output_mode := NULL, {_BQ_NAMED}) AS "
            f"{checked('AI.CLASSIFY', classify)}",
        ),
    ]


def _flock(u: PeerUdfs) -> list[tuple[str, str]]:
    """Flock's calls: ``fp`` is the prompt (:func:`~.peer_prompts.flock_prompt`, built in
    Python), ``ctx`` the context columns as JSON (the ranked calls return them)."""
    options = (
        f"__sem_flock_model(m), __sem_flock_temperature(m), __sem_flock_max_tokens(m), {_EMPTY}"
    )
    agg = (f"{u.agg}(any_value(fp.template), list(fp.args), any_value(fp.given), "
           f"{options})")  # fmt: skip
    score = ("CASE WHEN len(ctx) = 0 THEN error(peer || ': no context columns given; write '"
             " || peer || '({''model_name'': ''m''}, {''prompt'': ''...'', ''context_columns'': "
             "[{''data'': column}]})') ELSE "
             + _call(u.map_double, "fp", lead="'Rate from 0 to 10 how well this answers: '",
                     suffix="'\nAnswer with a number only.'", options=options) + " END")  # fmt: skip
    row = "to_json(list_transform(ctx, lambda e: e->'$.data'))"
    bodies = {
        "llm_filter": (u.filter, _call(u.filter, "fp", options=options)),
        "llm_complete": (u.map, _call(u.map, "fp", options=options)),
        "llm_reduce": (u.agg, agg),
    }
    out: list[tuple[str, str]] = []
    for name, (udf, body) in bodies.items():
        wrap = "list([{}])" if name == "llm_reduce" else "[{}]"
        out.append((f"__sem_{name}", f"(m, fp) AS {body}"))
        out.append((name, f"{_ours(name, udf, wrap)}, (m, p) AS __sem_{name}(m, "
                          f"__sem_flock_prompt(p)), (m, p, cols) AS __sem_{name}(m, "
                          "__sem_flock_prompt(p, cols))"))  # fmt: skip
    ranked = {"llm_first": f"arg_max({row}, {score})", "llm_last": f"arg_min({row}, {score})",
              "llm_rerank": f"list({row} ORDER BY {score} DESC)"}  # fmt: skip
    for name, body in ranked.items():
        out.append((f"__sem_{name}", f"(m, fp, ctx, peer) AS {body}"))
        out.append((name, f"(m, p) AS __sem_{name}(m, __sem_flock_prompt(p), "
                          f"__sem_flock_ctx(p), '{name}'), (m, p, cols) AS __sem_{name}(m, "
                          f"__sem_flock_prompt(p, cols), __sem_flock_ctx(p, cols), '{name}')"))  # fmt: skip
    if u.embed:
        text = ("CASE WHEN len(ctx) = 1 THEN ctx[1]->>'$.data' ELSE array_to_string("
                "list_transform(ctx, lambda e: e->>'$.data'), ' ') END")  # fmt: skip
        out.append(("__sem_llm_embedding", f"(ctx) AS sem_embed({text})"))
        out.append(("llm_embedding", "(m, p) AS __sem_llm_embedding(__sem_flock_ctx(p)), "
                                     "(m, p, cols) AS __sem_llm_embedding(__sem_flock_ctx(p, "
                                     "cols))"))  # fmt: skip
    return out


def peer_macros(udfs: PeerUdfs) -> list[tuple[str, str]]:
    """(name, parameters-and-body) of every TEMP peer macro, in the order to create them."""
    return [*_helpers(udfs), *_snowflake(udfs), *_bigquery(udfs), *_flock(udfs)]


def catalog_macros(catalog: str = "ai") -> list[tuple[str, str]]:
    """(name, parameters-and-body) of BigQuery's ``ai.if`` ... in the attached catalog: each
    calls this connection's TEMP macro (a catalog is shared by the database's connections)."""
    out = []
    for name in _BIGQUERY:
        lead = "i, categories := NULL, output_mode := NULL" if name == "classify" else "p"
        passed = (
            "i, categories := categories, output_mode := output_mode" if name == "classify" else "p"
        )
        schema = ", output_schema := NULL" if name == "generate" else ""
        schema_arg = ", output_schema := output_schema" if name == "generate" else ""
        named = ", ".join(
            f"{n} := {n}" for n in ("connection_id", "endpoint", "model_params", "request_type")
        )
        out.append(
            (
                f'{catalog}.main."{name}"',
                f"({lead}, {_BQ_NAMED}{schema}) AS "
                f"temp.main.__sem_bq_{name}({passed}, {named}{schema_arg})",
            )
        )
    return out
