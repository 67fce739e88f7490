"""The schemas ``llama:`` builds its output grammars from (no model needed: llama.cpp's schema
converter and grammar parser run on their own)."""

from __future__ import annotations

import json
import re

import pytest
from llama_cpp.llama_grammar import LlamaGrammar

from duckdb_sem.backends.llama_prompts import grammar_schema
from duckdb_sem.llm.outputs import parse_type

TYPES = ["INTEGER", "BIGINT", "DOUBLE", "BOOLEAN", "DATE", "JSON", "ENUM('pos', 'neg')",
         "VARCHAR[]", "INTEGER[]", "STRUCT(tone ENUM('positive', 'negative'), n INTEGER, "
         "d DATE, j JSON, tags VARCHAR[])"]  # fmt: skip


@pytest.mark.parametrize("sql", TYPES)
def test_every_type_has_a_grammar(sql: str) -> None:
    grammar = LlamaGrammar.from_json_schema(json.dumps(grammar_schema(parse_type(sql))))
    assert grammar is not None


def test_integers_are_bounded_to_their_type() -> None:
    digits = re.compile(grammar_schema(parse_type("INTEGER"))["pattern"])
    assert digits.match("-123456789") and digits.match("0")
    assert not digits.match("1234567890") and not digits.match("0012")
    struct = grammar_schema(parse_type("STRUCT(n INTEGER, big BIGINT[])"))
    assert struct["properties"]["n"]["pattern"] == digits.pattern
    assert "{0,17}" in struct["properties"]["big"]["items"]["pattern"]
    # the quoted digits parse back into integers
    assert parse_type("STRUCT(n INTEGER, big BIGINT[])").parse('{"n": "-7", "big": ["12"]}') == {
        "n": -7,
        "big": [12],
    }
