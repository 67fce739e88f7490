"""``llama:?layout=``: how one-field filter decisions are laid out (no model is loaded)."""

from __future__ import annotations

import pytest

from duckdb_sem.backends.llama import layout_option
from duckdb_sem.backends.registry import create_backend, parse_spec
from duckdb_sem.errors import ConfigError


def test_layout_defaults_to_canonical_and_takes_template() -> None:
    assert layout_option(parse_spec("llama:")) == "canonical"
    assert layout_option(parse_spec("llama:?layout=template")) == "template"


def test_an_unknown_layout_names_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match=r"layout='fancy' is not one of canonical, template"):
        create_backend("llama:?layout=fancy")
