"""Prompts for the ``llama:`` backend: chat rendering, fitting the context, output grammars.

Every prompt is the model's own chat template rendered to tokens (:func:`render`). A decision
prompt is the operator instruction as the system turn, the fixed few-shot examples, then the
row (:func:`decide_messages`); a closed answer (:func:`choice_messages`) has no examples. The
tokens all rows of one instruction and template share (:func:`shared_tokens`: the chat up to
the row, plus the template's text before its first field) are what the backend keeps in the
KV cache. A row too long for
``n_ctx`` keeps its head and tail around `` ... `` (:func:`fit_prompt`). Typed outputs are
decoded under a grammar built from a JSON schema of the SQL type (:func:`grammar_schema`), e.g.
``STRUCT(a DATE, b VARCHAR[])`` becomes::

    {"type": "object", "properties": {"a": {"type": "string", "format": "date", ...},
     "b": {"type": "array", "items": {"type": "string"}}}, "required": ["a", "b"], ...}

and an integer a bounded digit string (see :data:`_DIGITS`).
"""

from __future__ import annotations

import logging
from typing import Any

from duckdb_sem.backends.llama_model import LoadedModel
from duckdb_sem.errors import ConfigError
from duckdb_sem.llm.outputs import TypeSpec, json_schema
from duckdb_sem.llm.prompts import DECIDE_EXAMPLES, has_call_examples

__all__ = [
    "choice_messages",
    "decide_messages",
    "fit_prompt",
    "grammar_schema",
    "json_schema",
    "render",
    "shared_tokens",
    "tokenize",
]

log = logging.getLogger(__name__)

# The most digits an integer of each type may have under a grammar (fewer than the type allows:
# 999,999,999 fits INTEGER). llama-cpp-python's schema converter ignores ``minimum`` and
# ``maximum``, and greedy SmolLM2 wrote 16-digit "star ratings" under a plain integer grammar
# (6 of 20 held-out rows NULL: out of INTEGER range); a digit pattern bounds them.
_DIGITS = {"INTEGER": 9, "BIGINT": 18}


def grammar_schema(spec: TypeSpec) -> dict[str, Any]:
    """The JSON schema ``llama:`` builds its grammar from: :func:`json_schema`, with each
    INTEGER or BIGINT as a quoted string of at most :data:`_DIGITS` digits (parsed back into
    the integer like any answer).

    Example:
        >>> from duckdb_sem.llm.outputs import parse_type
        >>> grammar_schema(parse_type("INTEGER"))["pattern"]
        '^-?(0|[1-9][0-9]{0,8})$'
    """
    if spec.sql in _DIGITS:
        return {"type": "string", "pattern": f"^-?(0|[1-9][0-9]{{0,{_DIGITS[spec.sql] - 1}}})$"}
    if spec.kind == "list":
        ((_, child),) = spec.children
        return {"type": "array", "items": grammar_schema(child)}
    schema = json_schema(spec)
    if spec.kind == "struct":
        schema["properties"] = {name: grammar_schema(child) for name, child in spec.children}
    return schema


def decide_messages(prefix: str, row: str) -> list[dict[str, str]]:
    """The chat of a decision: instruction, few-shot examples, then the row (a call's own
    ``examples :=``, in its instruction, replace the default ones)."""
    messages = [{"role": "system", "content": prefix}]
    for statement, answer in () if has_call_examples(prefix) else DECIDE_EXAMPLES:
        messages.append({"role": "user", "content": statement})
        messages.append({"role": "assistant", "content": "yes" if answer else "no"})
    messages.append({"role": "user", "content": row})
    return messages


def choice_messages(prefix: str, row: str) -> list[dict[str, str]]:
    """The chat of a closed answer: instruction (naming the labels), then the row."""
    return [{"role": "system", "content": prefix}, {"role": "user", "content": row}]


def shared_tokens(
    model: LoadedModel, prefix: str, lead: str = "", *, examples: bool = True
) -> list[int]:
    """The tokens every row of ``prefix`` whose text starts with ``lead`` starts with."""
    chat = decide_messages if examples else choice_messages
    a = render(model, chat(prefix, lead + "A"))
    b = render(model, chat(prefix, lead + "B"))
    common = 0
    while common < min(len(a), len(b)) and a[common] == b[common]:
        common += 1
    return a[:common]


def fit_prompt(
    model: LoadedModel, messages: list[dict[str, str]], *, reserve: int, n_ctx: int
) -> list[int]:
    """The chat-formatted prompt, shortening the last user turn to fit the context."""
    tokens = render(model, messages)
    excess = len(tokens) + reserve - n_ctx
    if excess > 0:
        row = tokenize(model, messages[-1]["content"], special=False)
        keep = max(0, len(row) - excess - 8) // 2
        if keep == 0:
            raise ConfigError(
                f"llama backend: the instruction alone needs {len(tokens)} tokens, more than "
                f"n_ctx={n_ctx}; raise it with 'llama:?n_ctx=4096'"
            )
        llama = model.llama
        head = llama.detokenize(row[:keep]).decode("utf-8", "replace")
        tail = llama.detokenize(row[-keep:]).decode("utf-8", "replace")
        log.warning("row of %d tokens truncated to fit n_ctx=%d", len(row), n_ctx)
        messages = [*messages[:-1], {"role": "user", "content": f"{head} ... {tail}"}]
        tokens = render(model, messages)
    return tokens


def render(model: LoadedModel, messages: list[dict[str, str]]) -> list[int]:
    """The messages through the model's chat template, as tokens (after the BOS token the
    model asks for, unless its template already wrote it)."""
    prompt: str = model.formatter(messages=messages).prompt
    tokens = tokenize(model, prompt, special=True)
    lead = list(model.lead_ids)
    return tokens if tokens[: len(lead)] == lead else lead + tokens


def tokenize(model: LoadedModel, text: str, *, special: bool) -> list[int]:
    """Tokens of ``text`` (no BOS); the vocabulary is read-only, so this needs no lock."""
    tokens: list[int] = model.llama.tokenize(
        text.encode("utf-8", "replace"), add_bos=False, special=special
    )
    return tokens
