"""Each operator is profiled and costed on its own model: its tokenizer, its own statistics."""

from __future__ import annotations

import pyarrow as pa

import duckdb_sem
from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.estimator.profile import Profiler
from duckdb_sem.llm.call_options import CallOptions
from duckdb_sem.llm.request import OperatorKind
from duckdb_sem.optimizer.cost import operator_signature
from duckdb_sem.plan.nodes import SemCall


class Tenfold(RuleBackend):
    """A model whose tokenizer makes ten tokens of every word (a costlier model)."""

    def count_tokens(self, text: str) -> int:
        return 10 * super().count_tokens(text)


def test_prompt_tokens_are_counted_under_the_calls_model() -> None:
    profiler = Profiler(RuleBackend(), targets={"big": Tenfold()})
    args = [pa.array(["a fairly long review of a film"])]
    plain = SemCall("{0} is good", ("r.text",), OperatorKind.FILTER)
    big = SemCall("{0} is good", ("r.text",), OperatorKind.FILTER, options=CallOptions("big"))
    plain_stats = profiler.measure(plain, args)
    big_stats = profiler.measure(big, args)
    assert plain_stats is not None and big_stats is not None
    assert big_stats[0].prompt_tokens_per_row == 10 * plain_stats[0].prompt_tokens_per_row
    assert operator_signature(plain) != operator_signature(big)  # statistics kept apart


def test_the_optimizer_runs_the_cheaper_models_filter_first() -> None:
    with duckdb_sem.connect(backend=RuleBackend(), cache="off", models={"big": Tenfold()}) as con:
        con.execute("CREATE TABLE r AS SELECT 'a review with several words' AS text")
        for first, second in (("model := 'big'", ""), ("", "model := 'big'")):
            calls = [f"sem_filter('{{text}} check A'{', ' + first if first else ''})",
                     f"sem_filter('{{text}} check B'{', ' + second if second else ''})"]  # fmt: skip
            lines = [row[0] for row in con.sql(
                f"EXPLAIN SEMANTIC SELECT * FROM r WHERE {calls[0]} AND {calls[1]}"
            ).fetchall()]  # fmt: skip
            filters = [line for line in lines if "SemFilter" in line and "tokens≈" in line]
            # the tree's lower operator runs first: the default model's, whatever the order
            assert "model := 'big'" in filters[0] and "model := 'big'" not in filters[1]
            tokens = [float(f.split("tokens≈")[1].replace(",", "")) for f in filters]
            assert tokens[0] > 5 * tokens[1] / 2  # the big model's prompts count ten-fold
