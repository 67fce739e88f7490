"""Named arguments of the sem_* functions: parsed in one place, bad ones fail with a clear error."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from duckdb_sem.errors import BindError
from duckdb_sem.llm.call_options import CallOptions, split_options
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import OperatorKind


def _call(sql: str) -> exp.Anonymous:
    node = sqlglot.parse_one(f"SELECT {sql}", dialect="duckdb").expressions[0]
    assert isinstance(node, exp.Anonymous)
    return node


def test_named_arguments_after_the_positional_ones() -> None:
    positional, named, options = split_options(
        _call("sem_map('{0} short', t, model := 'Fast', temperature := 0.2, max_tokens := 16)")
    )
    assert [a.sql() for a in positional] == ["'{0} short'", "t"]
    assert len(named) == 3
    assert options == CallOptions(model="Fast", temperature=0.2, max_tokens=16)
    assert options.model_name == "fast"


def test_arrow_form_reads_the_same() -> None:
    _, _, options = split_options(_call("sem_map('{text}', model => 'big')"))
    assert options.model == "big"


def test_no_named_arguments_is_the_default() -> None:
    positional, named, options = split_options(_call("sem_filter('{text} good')"))
    assert len(positional) == 1 and named == [] and options.is_default


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("sem_map('{text}', temperature := -0.5)", "temperature := -0.5 must be a number >= 0"),
        ("sem_map('{text}', max_tokens := 0)", "max_tokens := 0 must be a whole number >= 1"),
        ("sem_map('{text}', max_tokens := 2.5)", "max_tokens := takes a whole number"),
        ("sem_map('{text}', temperature := 'hot')", "temperature := takes a number"),
        ("sem_map('{text}', model := 3)", "model := takes a string"),
        ("sem_map('{text}', modle := 'x')", "unknown named argument 'modle'; did you mean model?"),
        ("sem_map('{text}', model := 'a', model := 'b')", "model := is given twice"),
        ("sem_map('{text}', model := t.col)", "model := must be a literal value"),
        ("sem_map('{0}', model := 'a', t)", "positional argument t after a named one"),
        ("sem_filter('{text} ok', temperature := 0.3)", "temperature do not apply to a yes/no"),
        ("sem_join('{a} {b}', max_tokens := 3)", "max_tokens do not apply to a yes/no"),
    ],
)
def test_bad_named_arguments_are_bind_errors(sql: str, message: str) -> None:
    with pytest.raises(BindError, match=message.replace("(", r"\(").replace("?", r"\?")):
        split_options(_call(sql))


def test_options_change_the_request_and_its_signature() -> None:
    plain = build_request(OperatorKind.MAP, "Dune", output_type="VARCHAR")
    warm = build_request(
        OperatorKind.MAP, "Dune", output_type="VARCHAR", options=CallOptions(temperature=0.7)
    )
    short = build_request(
        OperatorKind.MAP, "Dune", output_type="VARCHAR", options=CallOptions(max_tokens=5)
    )
    assert (warm.params.temperature, short.params.max_tokens) == (0.7, 5)
    assert plain.params.max_tokens == warm.params.max_tokens  # only what was given changes
    signatures = {r.signature("test:") for r in (plain, warm, short)}
    assert len(signatures) == 3


def test_sql_args_round_trip() -> None:
    options = CallOptions(model="it's", temperature=0.25, max_tokens=8)
    _, _, parsed = split_options(_call("sem_map('{text}'" + options.sql_args() + ")"))
    assert parsed == options
