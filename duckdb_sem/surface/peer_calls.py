"""One rewrite per peer call: Snowflake Cortex and BigQuery arguments to ``sem_*`` calls.

Each function takes the parsed :class:`~.peer_args.PeerCall` and the connection's model names
and returns the duckdb-sem SQL for it (Flock's are in :mod:`.peer_flock`, the classifiers'
shared label choice in :mod:`.peer_classify`), or None when the arguments are already duckdb-sem's
(``AI_FILTER('{text} is spam')``: left for the alias table). Wrong arguments raise a
``BindError`` naming the peer call, what it expects and the duckdb-sem call that does the same.

Example:
    ``AI_CLASSIFY(text, ['travel', 'cooking'])`` becomes
    ``struct_pack(labels := [sem_classify('Classify ...: {0}', ['travel', 'cooking'], text)])``
"""

from __future__ import annotations

import re

from sqlglot import exp

from duckdb_sem.errors import SemError
from duckdb_sem.llm.outputs import parse_type
from duckdb_sem.surface.peer_args import (
    Models,
    PeerCall,
    Prompt,
    Rewrite,
    decoding,
    key_values,
    literal,
    model_option,
    peer_error,
    string_of,
)
from duckdb_sem.surface.peer_classify import classified
from duckdb_sem.surface.peer_flock import FLOCK

__all__ = ["PEERS", "SENTIMENTS"]

#: AI_SENTIMENT's categories, as Snowflake names them (without its 'unknown')
SENTIMENTS = ("positive", "negative", "neutral", "mixed")
_BQ_OPTIONS = {"connection_id", "endpoint", "model_params", "request_type", "prompt"}


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
    call.check_shape(1, usage, ours)
    return Prompt.of(first, call.peer, usage, ours).call("sem_filter")


def ai_complete(call: PeerCall, models: Models) -> str | None:
    model = string_of(call.get("model", 0))
    usage = "AI_COMPLETE('model', 'prompt' or PROMPT(...) [, {'temperature': 0.2}])"
    ours = "sem_map('Gist of {text}', model := 'name')"
    if model is None or len(call.args) < 2 or not _model_like(model, call.args[1]):
        return None
    call.check_shape(4, usage, ours)
    prompt = Prompt.of(call.args[1], call.peer, usage, ours)
    options = model_option(model, models)
    if len(call.args) > 2:
        options += decoding(call, key_values(call.args[2]), usage, ours)
    if len(call.args) > 3:
        raise peer_error(call.peer, "response_format and show_details are not supported",
                         usage, "sem_map('...', 'STRUCT(name VARCHAR)') for a typed answer")  # fmt: skip
    return prompt.call("sem_map", options=options)


def ai_agg(call: PeerCall, models: Models) -> str | None:
    first, usage = call.get("expr", 0), "AI_AGG(column, 'instruction')"
    ours = "sem_agg('Summarize the complaints: {text}')"
    if first is None or _ours(first):
        return None
    call.check_shape(2, usage, ours)
    instruction = string_of(call.get("instruction", 1))
    if instruction is None:
        raise peer_error(call.peer, "the instruction must be one string literal", usage, ours)
    return Prompt.of(first, call.peer, usage, ours).prefixed(f"{instruction}: ").call("sem_agg")


def ai_summarize_agg(call: PeerCall, models: Models) -> str | None:
    usage, ours = "AI_SUMMARIZE_AGG(column)", "sem_agg('Summarize: {text}')"
    call.check_shape(1, usage, ours)
    if not call.args:
        raise peer_error(call.peer, "takes one column, got none", usage, ours)
    prompt = Prompt.of(call.args[0], call.peer, usage, ours)
    return prompt.prefixed("Summarize these texts: ").call("sem_agg")


def ai_sentiment(call: PeerCall, models: Models) -> str | None:
    usage, ours = "AI_SENTIMENT(text)", f"sem_classify('Sentiment of {{text}}', {list(SENTIMENTS)})"
    if len(call.args) != 1:
        raise peer_error(call.peer, "aspect categories are not supported; give the text alone",
                         usage, ours)  # fmt: skip
    call.check_shape(1, usage, ours)
    prompt = Prompt.of(call.args[0], call.peer, usage, ours).prefixed("The sentiment of: ")
    return prompt.call("sem_classify", "[" + ", ".join(map(literal, SENTIMENTS)) + "]")


def ai_classify(call: PeerCall, models: Models) -> str | None:
    """Snowflake's answer is an object ``{labels: [...]}``: a STRUCT(labels VARCHAR[]) here."""
    usage = "AI_CLASSIFY(text, ['a', 'b'] [, {'output_mode': 'multi'}])"
    call.check_shape(3, usage, "sem_classify('{text} kind', ['a', 'b'])")
    config = key_values(call.get("config", 2)) or {}
    task = string_of(config.pop("task_description", None))
    mode = string_of(config.pop("output_mode", None)) or "single"
    if config:
        raise peer_error(call.peer, f"unsupported config key(s) {sorted(config)}", usage,
                         "sem_classify('{text} kind', ['a', 'b'])")  # fmt: skip
    labels = classified(call, call.get("input", 0), call.get("categories", 1), task, mode, usage)
    return f"struct_pack(labels := {labels})"


def ai_embed(call: PeerCall, models: Models) -> str | None:
    usage, ours = "AI_EMBED('model', text)", "sem_embed(text)"
    if len(call.args) != 2:  # the model name is not read: one embedding model per connection
        raise peer_error(call.peer, "takes a model name and the text", usage, ours)
    call.check_shape(2, usage, ours)
    return f"sem_embed({call.args[1].sql(dialect='duckdb')})"


# -- BigQuery ---------------------------------------------------------------------------------
def _bq_prompt(call: PeerCall, models: Models, usage: str, ours: str) -> tuple[Prompt, list[str]]:
    call.check_shape(1, usage, ours, named=_BQ_OPTIONS | {"output_schema"})
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
    call.check_shape(2, usage, "sem_classify('{text} kind', ['a', 'b'])",
                     named={"input", "categories", "output_mode", *_BQ_OPTIONS})  # fmt: skip
    mode = string_of(call.get("output_mode")) or "single"
    return classified(call, call.get("input", 0), call.get("categories", 1), None, mode, usage,
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
    **FLOCK,
}
