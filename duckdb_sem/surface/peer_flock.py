"""Flock's calls: a model object, a prompt object with context columns, (Flock 0.2) a columns
object, rewritten to the ``sem_*`` call each means.

``llm_filter({'model_name': 'm'}, {'prompt': 'Is it eco-friendly?', 'context_columns':
[{'data': d}]})`` is ``sem_filter('Is it eco-friendly?\\n{0}', d)``: the instruction, then each
context column one a line (``name: value`` when it has a name), as Flock sends them.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from duckdb_sem.surface.peer_args import (
    Models,
    PeerCall,
    Prompt,
    Rewrite,
    decoding,
    key_values,
    model_option,
    peer_error,
    string_of,
)

__all__ = ["FLOCK"]

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
        call.check_shape(3, usage, ours)
        unknown = set(model) - _FLOCK_MODEL
        if unknown:
            raise peer_error(call.peer, f"unknown model key(s) {sorted(unknown)}", usage, ours)
        options = model_option(string_of(model.get("model_name", model.get("model"))), models)
        options += decoding(call, key_values(model.get("model_parameters")), usage, ours)
        prompt = _flock_prompt(call, usage, ours)
        if wrap is None:
            return prompt.call(function, options=options)
        if not prompt.args:  # a ranking or an embedding of nothing
            raise peer_error(call.peer, "no context columns given", usage, ours)
        return wrap(prompt, options)

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


FLOCK: dict[str, Rewrite] = {
    "llm_filter": _flock("sem_filter"),
    "llm_complete": _flock("sem_map"),
    "llm_reduce": _flock("sem_agg"),
    "llm_first": _flock("sem_map", _ranked("arg_max({row}, {score})")),
    "llm_last": _flock("sem_map", _ranked("arg_min({row}, {score})")),
    "llm_rerank": _flock("sem_map", _ranked("list({row} ORDER BY {score} DESC)")),
    "llm_embedding": _flock("sem_embed", _flock_embedding),
}
