"""``examples :=`` and ``batch_size :=``: parsed with the other named arguments, bad shapes are
BindErrors naming the expected form, examples go in the instruction (so in the signature) and
replace the default few-shot examples, and batch size changes no request."""

from __future__ import annotations

import re

import pytest
import sqlglot
from sqlglot import exp

from duckdb_sem.backends.llama_prompts import decide_messages
from duckdb_sem.errors import BindError
from duckdb_sem.llm.call_options import EXAMPLES_FORM, CallOptions, split_options
from duckdb_sem.llm.prompts import DECIDE_EXAMPLES, build_request
from duckdb_sem.llm.request import OperatorKind

EXAMPLES = "[{'input': 'lovely', 'output': true}, {'input': 'awful', 'output': 'no'}]"


def _options(sql: str) -> CallOptions:
    node = sqlglot.parse_one(f"SELECT {sql}", dialect="duckdb").expressions[0]
    assert isinstance(node, exp.Anonymous)
    return split_options(node)[2]


def test_examples_and_batch_size_are_parsed() -> None:
    options = _options(f"sem_filter('{{t}} nice', examples := {EXAMPLES}, batch_size := 8)")
    assert options.examples == (("lovely", "true"), ("awful", "no"))
    assert options.batch_size == 8 and not options.is_default
    assert options.example_pairs(decision=True) == (("lovely", "yes"), ("awful", "no"))
    mapped = _options("sem_map('{t} upper', examples := [{'input': 'ab', 'output': 'true'}])")
    assert mapped.example_pairs(decision=False) == (("ab", "true"),)  # a map's text as given
    rated = _options("sem_map_integer('{t} 1 to 5', examples := [{'input': 'ok', 'output': 3}])")
    assert rated.examples == (("ok", "3"),)


def test_sql_args_round_trip() -> None:
    options = _options(f"sem_filter('{{t}}', examples := {EXAMPLES}, batch_size := 4)")
    assert _options(f"sem_filter('{{t}}'{options.sql_args()})") == options
    assert "batch_size := 4" in options.sql_args()


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("sem_filter('{t}', examples := ['lovely'])", "each is a struct with exactly the fields"),
        ("sem_filter('{t}', examples := 'lovely')", "takes a list of structs"),
        ("sem_filter('{t}', examples := [{'input': 'a'}])", "exactly the fields input and output"),
        ("sem_filter('{t}', examples := [])", "gives no example"),
        (
            "sem_filter('{t}', examples := [{'input': 'a', 'output': 'maybe'}])",
            "answer 'yes' or 'no'",
        ),
        ("sem_map('{t}', examples := [{'input': '', 'output': 'x'}])", "non-empty input"),
        ("sem_agg('{t}', examples := [{'input': 'a', 'output': 'b'}])", "not to an aggregate"),
        (
            "sem_join('{a} {b}', per_row := 'Good? {t}', examples := [{'input': 'a', 'output': 'no'}])",
            "per_row := replaces with a per-row one",
        ),
        ("sem_filter('{t}', batch_size := 0)", "batch_size := 0 must be a whole number >= 1"),
        ("sem_filter('{t}', batch_size := 2.5)", "batch_size := takes a whole number"),
        ("sem_filter('{t}', batch_siz := 2)", "did you mean batch_size?"),
    ],
)
def test_bad_shapes_are_bind_errors_naming_the_form(sql: str, message: str) -> None:
    with pytest.raises(BindError, match=message.replace("(", r"\(").replace("?", r"\?")) as err:
        _options(sql)
    if "examples :=" in sql and not re.search("sem_agg|per_row", sql):  # a bad shape: the form
        assert EXAMPLES_FORM in str(err.value)


def test_examples_go_in_the_instruction_and_the_signature() -> None:
    plain = build_request(OperatorKind.FILTER, "Is it nice? good film")
    one = build_request(OperatorKind.FILTER, "Is it nice? good film",
                        options=_options(f"sem_filter('x', examples := {EXAMPLES})"))  # fmt: skip
    other = build_request(
        OperatorKind.FILTER, "Is it nice? good film",
        options=_options("sem_filter('x', examples := [{'input': 'grim', 'output': 'no'}])"),
    )  # fmt: skip
    assert one.prefix.startswith(plain.prefix) and "Input: lovely\nAnswer: yes" in one.prefix
    sigs = {r.signature("b") for r in (plain, one, other)}
    assert len(sigs) == 3  # different examples never share a cached answer
    batched = build_request(OperatorKind.FILTER, "Is it nice? good film",
                            options=_options("sem_filter('x', batch_size := 3)"))  # fmt: skip
    assert batched.signature("b") == plain.signature("b")  # batch size changes no answer


def test_call_examples_replace_the_default_few_shot_turns() -> None:
    plain = build_request(OperatorKind.FILTER, "Is it nice? good film")
    given = build_request(OperatorKind.FILTER, "Is it nice? good film",
                          options=_options(f"sem_filter('x', examples := {EXAMPLES})"))  # fmt: skip
    assert len(decide_messages(plain.prefix, plain.row)) == 2 + 2 * len(DECIDE_EXAMPLES)
    assert [m["role"] for m in decide_messages(given.prefix, given.row)] == ["system", "user"]
