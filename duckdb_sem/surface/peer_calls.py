"""One rewrite per peer call: Snowflake Cortex, BigQuery and Flock arguments to ``sem_*`` calls.

Each function takes the parsed :class:`~.peer_args.PeerCall` and the connection's model names
and returns the duckdb-sem SQL for it, or None when the arguments are already duckdb-sem's
(``AI_FILTER('{text} is spam')``: left for the alias table). Wrong arguments raise a
``BindError`` naming the peer call, what it expects and the duckdb-sem call that does the same.

Example:
    ``AI_CLASSIFY(text, ['travel', 'cooking'])`` becomes
    ``struct_pack(labels := [sem_classify('Classify ...: {0}', ['travel', 'cooking'], text)])``
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection

from sqlglot import exp

from duckdb_sem.errors import SemError
from duckdb_sem.llm.outputs import parse_type
from duckdb_sem.surface.peer_args import (
    PeerCall,
    Prompt,
    key_values,
    model_option,
    peer_error,
    string_of,
)

__all__ = ["PEERS", "SENTIMENTS"]

Models = Collection[str] | None
Rewrite = Callable[[PeerCall, Models], str | None]

#: AI_SENTIMENT's categories, as Snowflake names them (without its 'unknown')
SENTIMENTS = ("positive", "negative", "neutral", "mixed")
_BQ_OPTIONS = {"connection_id", "endpoint", "model_params", "request_type", "prompt"}


def _lit(text: str) -> str:
    return exp.Literal.string(text).sql(dialect="duckdb")


def _ours(node: exp.Expression | None) -> bool:
    """A string literal first: duckdb-sem's own template (the alias table's business)."""
    return string_of(node) is not None


# -- Snowflake Cortex -------------------------------------------------------------------------
def ai_filter(call: PeerCall, models: Models) -> str | None:
    first = call.get("input", 0)
    usage, ours = "AI_FILTER(PROMPT('Is {0} spam?', body))", "sem_filter('Is {body} spam?')"
    if first is None:
        raise peer_error(call.peer, "no input given", usage, ours)
    if _ours(first):
        return None
    return Prompt.of(first, call.peer, usage, ours).call("sem_filter")


def ai_complete(call: PeerCall, models: Models) -> str | None:
    model = string_of(call.get("model", 0))
    usage = "AI_COMPLETE('model', 'prompt' or PROMPT(...) [, {'temperature': 0.2}])"
    ours = "sem_map('Gist of {text}', model := 'name')"
    if model is None or len(call.args) < 2 or not _model_like(model, call.args[1]):
        return None
    prompt = Prompt.of(call.args[1], call.peer, usage, ours)
    options = model_option(model, models)
    if len(call.args) > 2:
        options += _decoding(call, key_values(call.args[2]), usage, ours)
    if len(call.args) > 3:
        raise peer_error(call.peer, "response_format and show_details are not supported",
                         usage, "sem_map('...', 'STRUCT(name VARCHAR)') for a typed answer")  # fmt: skip
    return prompt.call("sem_map", options=options)


def ai_agg(call: PeerCall, models: Models) -> str | None:
    first, usage = call.get("expr", 0), "AI_AGG(column, 'instruction')"
    ours = "sem_agg('Summarize the complaints: {text}')"
    if first is None or _ours(first):
        return None
    instruction = string_of(call.get("instruction", 1))
    if instruction is None or len(call.args) > 2:
        raise peer_error(call.peer, "the instruction must be one string literal", usage, ours)
    return Prompt.of(first, call.peer, usage, ours).prefixed(f"{instruction}: ").call("sem_agg")


def ai_summarize_agg(call: PeerCall, models: Models) -> str | None:
    usage, ours = "AI_SUMMARIZE_AGG(column)", "sem_agg('Summarize: {text}')"
    if len(call.args) != 1:
        raise peer_error(call.peer, f"takes one column, got {len(call.args)}", usage, ours)
    prompt = Prompt.of(call.args[0], call.peer, usage, ours)
    return prompt.prefixed("Summarize these texts: ").call("sem_agg")


def ai_sentiment(call: PeerCall, models: Models) -> str | None:
    usage, ours = "AI_SENTIMENT(text)", f"sem_classify('Sentiment of {{text}}', {list(SENTIMENTS)})"
    if len(call.args) != 1:
        raise peer_error(call.peer, "aspect categories are not supported; give the text alone",
                         usage, ours)  # fmt: skip
    prompt = Prompt.of(call.args[0], call.peer, usage, ours).prefixed("The sentiment of: ")
    return prompt.call("sem_classify", "[" + ", ".join(map(_lit, SENTIMENTS)) + "]")


def ai_classify(call: PeerCall, models: Models) -> str | None:
    """Snowflake's answer is an object ``{labels: [...]}``: a STRUCT(labels VARCHAR[]) here."""
    usage = "AI_CLASSIFY(text, ['a', 'b'] [, {'output_mode': 'multi'}])"
    config = key_values(call.get("config", 2)) or {}
    task = string_of(config.pop("task_description", None))
    mode = string_of(config.pop("output_mode", None)) or "single"
    if config:
        raise peer_error(call.peer, f"unsupported config key(s) {sorted(config)}", usage,
                         "sem_classify('{text} kind', ['a', 'b'])")  # fmt: skip
    labels = _classified(call, call.get("input", 0), call.get("categories", 1), task, mode, usage)
    return f"struct_pack(labels := {labels})"


def ai_embed(call: PeerCall, models: Models) -> str | None:
    usage, ours = "AI_EMBED('model', text)", "sem_embed(text)"
    if len(call.args) != 2:  # the model name is not read: one embedding model per connection
        raise peer_error(call.peer, "takes a model name and the text", usage, ours)
    return f"sem_embed({call.args[1].sql(dialect='duckdb')})"


# -- BigQuery ---------------------------------------------------------------------------------
def _bq_prompt(call: PeerCall, models: Models, usage: str, ours: str) -> tuple[Prompt, list[str]]:
    call.check_named(_BQ_OPTIONS | {"output_schema"}, usage, ours)
    node = call.get("prompt", 0)
    if node is None:
        raise peer_error(call.peer, "no prompt given", usage, ours)
    if call.get("model_params") is not None:
        raise peer_error(call.peer, "model_params is not supported", usage,
                         "temperature := / max_tokens := on the sem_* call")  # fmt: skip
    endpoint = string_of(call.get("endpoint"))
    return Prompt.of(node, call.peer, usage, ours), model_option(endpoint, models)


def ai_if(call: PeerCall, models: Models) -> str | None:
    if call.peer.lower() == "ai_if" and _ours(call.get("prompt", 0)):
        return None
    usage, ours = (
        "AI.IF(('Is this about cats? ', text))",
        "sem_filter('Is this about cats? {text}')",
    )
    prompt, options = _bq_prompt(call, models, usage, ours)
    return prompt.call("sem_filter", options=options)


def ai_score(call: PeerCall, models: Models) -> str | None:
    usage, ours = "AI.SCORE(('Rate from 1 to 10: ', review))", "sem_map('Rate {review}', 'DOUBLE')"
    prompt, options = _bq_prompt(call, models, usage, ours)
    asked = prompt.suffixed("\nAnswer with a number only.")
    return asked.call("sem_map", output="DOUBLE", options=options)


def ai_generate(call: PeerCall, models: Models) -> str | None:
    """BigQuery answers ``STRUCT<result STRING, ...>``; with ``output_schema`` its fields."""
    if call.peer.lower() == "ai_generate" and _ours(call.get("prompt", 0)):
        return None
    usage = "AI.GENERATE(('Summarize: ', text) [, output_schema => 'name STRING, age INT64'])"
    ours = "sem_map('Summarize: {text}')"
    prompt, options = _bq_prompt(call, models, usage, ours)
    schema = string_of(call.get("output_schema"))
    if schema is None:
        return f"struct_pack(result := {prompt.call('sem_map', options=options)})"
    typed = _bq_struct(schema, call.peer, usage, ours)
    return prompt.call("sem_map", output=typed, options=options)


def bq_classify(call: PeerCall, models: Models) -> str | None:
    usage = "AI.CLASSIFY(text, ['a', 'b'] [, output_mode => 'multi'])"
    call.check_named({"input", "categories", "output_mode", *_BQ_OPTIONS}, usage,
                     "sem_classify('{text} kind', ['a', 'b'])")  # fmt: skip
    mode = string_of(call.get("output_mode")) or "single"
    return _classified(call, call.get("input", 0), call.get("categories", 1), None, mode, usage,
                       scalar=True)  # fmt: skip


_BQ_TYPES = {"STRING": "VARCHAR", "INT64": "BIGINT", "FLOAT64": "DOUBLE", "BOOL": "BOOLEAN",
             "NUMERIC": "DOUBLE", "DATE": "DATE"}  # fmt: skip


def _bq_struct(schema: str, peer: str, usage: str, ours: str) -> str:
    """BigQuery's ``'name STRING, age INT64'`` as a DuckDB STRUCT type."""
    fields = []
    for part in filter(None, (p.strip() for p in schema.split(","))):
        name, _, kind = part.partition(" ")
        sql = _BQ_TYPES.get(kind.strip().upper())
        if not name or sql is None:
            raise peer_error(peer, f"output_schema field {part!r} is not 'name TYPE' with TYPE "
                             f"one of {', '.join(_BQ_TYPES)}", usage, ours)  # fmt: skip
        fields.append(f"{name} {sql}")
    return f"STRUCT({', '.join(fields)})"


# -- shared by both classifiers ----------------------------------------------------------------
def _classified(
    call: PeerCall,
    input_node: exp.Expression | None,
    categories: exp.Expression | None,
    task: str | None,
    mode: str,
    usage: str,
    *,
    scalar: bool = False,
) -> str:
    """The SQL of the chosen label(s): one scored choice among the labels (single), or one
    scored yes/no decision per label (multi), a list of those that apply."""
    ours = "sem_classify('{text} kind', ['a', 'b'])"
    if input_node is None:
        raise peer_error(call.peer, "no input given", usage, ours)
    labels = _labels(call, categories, usage, ours)
    described = [f"{name}: {text}" if text else name for name, text in labels]
    prompt = Prompt.of(input_node, call.peer, usage, ours)
    lead = f"{task}\n" if task else ""
    if mode.lower() == "single":
        asked = prompt.prefixed(f"{lead}Classify into one of: {'; '.join(described)}.\nText: ")
        chosen = asked.call("sem_classify", "[" + ", ".join(_lit(n) for n, _ in labels) + "]")
        return chosen if scalar else f"[{chosen}]"
    if mode.lower() != "multi":
        raise peer_error(
            call.peer, f"output_mode is 'single' or 'multi', got {mode!r}", usage, ours
        )
    decisions = []
    for (name, _), text in zip(labels, described, strict=True):
        asked = prompt.prefixed(f"{lead}Does the category '{text}' apply to this text? ")
        yes = asked.call("sem_map", output="BOOLEAN")
        decisions.append(f"CASE WHEN {yes} THEN [{_lit(name)}] ELSE []::VARCHAR[] END")
    return f"flatten([{', '.join(decisions)}])"


def _labels(
    call: PeerCall, node: exp.Expression | None, usage: str, ours: str
) -> list[tuple[str, str | None]]:
    """(label, description) per category: strings, {'label', 'description'} objects (Snowflake)
    or ('label', 'description') tuples (BigQuery)."""
    if not isinstance(node, exp.Array) or len(node.expressions) < 2:
        raise peer_error(call.peer, "the categories must be a list of at least two labels",
                         usage, ours)  # fmt: skip
    out: list[tuple[str, str | None]] = []
    for item in node.expressions:
        entry = key_values(item)
        parts = item.expressions if isinstance(item, exp.Tuple) else []
        if string_of(item) is not None:
            out.append((str(string_of(item)), None))
        elif entry is not None and string_of(entry.get("label")) is not None:
            out.append((str(string_of(entry["label"])), string_of(entry.get("description"))))
        elif len(parts) == 2 and all(string_of(p) is not None for p in parts):
            out.append((str(string_of(parts[0])), string_of(parts[1])))
        else:
            raise peer_error(call.peer, f"category {item.sql(dialect='duckdb')} is not a string "
                             "literal or a label with a description", usage, ours)  # fmt: skip
    if len({n for n, _ in out}) != len(out):
        raise peer_error(call.peer, "the categories repeat a label", usage, ours)
    return out


# -- Flock ------------------------------------------------------------------------------------
_FLOCK_MODEL = {"model_name", "model", "secret_name", "batch_size", "tuple_format",
                "model_parameters"}  # fmt: skip


def _flock(function: str, wrap: Callable[[Prompt, list[str]], str] | None = None) -> Rewrite:
    def rewrite(call: PeerCall, models: Models) -> str | None:
        usage = (f"{call.peer}({{'model_name': 'm'}}, {{'prompt': '...', "
                 "'context_columns': [{'data': column}]})")  # fmt: skip
        ours = f"{function}('... {{column}}')"
        model = key_values(call.get("model", 0))
        if model is None:
            return None  # duckdb-sem's arguments: a template first
        unknown = set(model) - _FLOCK_MODEL
        if unknown:
            raise peer_error(call.peer, f"unknown model key(s) {sorted(unknown)}", usage, ours)
        options = model_option(string_of(model.get("model_name", model.get("model"))), models)
        options += _decoding(call, key_values(model.get("model_parameters")), usage, ours)
        prompt = _flock_prompt(call, usage, ours)
        return wrap(prompt, options) if wrap else prompt.call(function, options=options)

    return rewrite


def _flock_prompt(call: PeerCall, usage: str, ours: str) -> Prompt:
    spec = key_values(call.get("prompt", 1))
    if spec is None:
        raise peer_error(call.peer, "the second argument must be {'prompt': '...', ...}", usage,
                         ours)  # fmt: skip
    if "prompt_name" in spec:
        raise peer_error(call.peer, "named prompts (CREATE PROMPT) do not exist here: write the "
                         "prompt itself", usage, ours)  # fmt: skip
    text = string_of(spec.pop("prompt", None)) or ""
    context: list[tuple[str | None, str]] = []
    columns = spec.pop("context_columns", None)
    if spec:
        raise peer_error(call.peer, f"unknown prompt key(s) {sorted(spec)}", usage, ours)
    for item in columns.expressions if isinstance(columns, exp.Array) else []:
        entry = key_values(item) or {}
        if "data" not in entry or string_of(entry.get("type")) not in (None, "tabular"):
            raise peer_error(call.peer, "each context column is {'data': column [, 'name': "
                             "'label']} (text only)", usage, ours)  # fmt: skip
        context.append((string_of(entry.get("name")), entry["data"].sql(dialect="duckdb")))
    legacy = key_values(call.get("columns", 2))  # Flock 0.2: a third {'name': column} object
    for name, value in (legacy or {}).items():
        context.append((name, value.sql(dialect="duckdb")))
    return Prompt.with_context(text, context)


def _ranked(aggregate: str) -> Callable[[Prompt, list[str]], str]:
    """llm_first / llm_last / llm_rerank: one scored answer per row, then the best, the worst or
    all in order; the value is the row's context columns as JSON, as Flock returns it."""

    def wrap(prompt: Prompt, options: list[str]) -> str:
        score = (
            prompt.prefixed("Rate from 0 to 10 how well this answers: ")
            .suffixed("\nAnswer with a number only.")
            .call("sem_map", output="DOUBLE", options=options)
        )
        row = "json_array(" + ", ".join(prompt.args) + ")"
        return aggregate.format(row=row, score=score)

    return wrap


def _flock_embedding(prompt: Prompt, options: list[str]) -> str:
    text = prompt.args[0] if len(prompt.args) == 1 else f"concat_ws(' ', {', '.join(prompt.args)})"
    return f"sem_embed({text})"


def _decoding(
    call: PeerCall, params: dict[str, exp.Expression] | None, usage: str, ours: str
) -> list[str]:
    out = []
    for key, value in (params or {}).items():
        if key not in ("temperature", "max_tokens"):
            raise peer_error(call.peer, f"model parameter {key!r} is not supported (temperature "
                             "and max_tokens are)", usage, ours)  # fmt: skip
        out.append(f"{key} := {value.sql(dialect='duckdb')}")
    return out


def _model_like(model: str, second: exp.Expression) -> bool:
    """``AI_COMPLETE('model', prompt)`` rather than ``ai_complete('template', 'TYPE')``."""
    if not re.fullmatch(r"[\w.:/-]+", model):
        return False
    kind = string_of(second)
    if kind is None:
        return True
    try:
        parse_type(kind)
    except SemError:
        return True
    return False


PEERS: dict[str, Rewrite] = {
    "ai_filter": ai_filter,
    "ai_complete": ai_complete,
    "ai_agg": ai_agg,
    "ai_summarize_agg": ai_summarize_agg,
    "ai_sentiment": ai_sentiment,
    "ai_classify": ai_classify,
    "ai_embed": ai_embed,
    "ai.if": ai_if,
    "ai_if": ai_if,
    "ai.score": ai_score,
    "ai.generate": ai_generate,
    "ai_generate": ai_generate,
    "ai.classify": bq_classify,
    "llm_filter": _flock("sem_filter"),
    "llm_complete": _flock("sem_map"),
    "llm_reduce": _flock("sem_agg"),
    "llm_first": _flock("sem_map", _ranked("arg_max({row}, {score})")),
    "llm_last": _flock("sem_map", _ranked("arg_min({row}, {score})")),
    "llm_rerank": _flock("sem_map", _ranked("list({row} ORDER BY {score} DESC)")),
    "llm_embedding": _flock("sem_embed", _flock_embedding),
}
