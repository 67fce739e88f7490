"""A semantic join's pairs in the order of their template's first field, so they share a prefix.

A pair's prompt starts with the instruction, the template's lead and its first field's value
(``LLMRequest.first_side``). Backends that keep a KV cache (the embedded model's segments,
``backends/llama.py``) or a prefix cache (vLLM, the simulated server) evaluate that start once
for a run of pairs that share it, but only if those pairs arrive together. DuckDB's cross
product emits the pairs of one *right* row in a run, and the executor cuts pairs into batches of
the driving scan's size, so a template that names a left column first saw each value once per
batch. Sorting the pairs by the first field's text (``::VARCHAR``: what the value renders as,
``llm/render.py``) puts every pair of one value next to each other across all batches of an SEU.
Answers do not change: each pair is one request whatever its neighbours
(``RuntimeOptions.order_pairs`` turns the sort off).

Example: for ``sem_join('Review: {0} Plot: {1}', "r.text", "p.plot")`` the nested loop's
``SELECT * FROM (...) AS __l CROSS JOIN (...) AS __r`` becomes::

    SELECT * FROM (SELECT * FROM (...) AS __l CROSS JOIN (...) AS __r) AS __pairs
    ORDER BY "r.text"::VARCHAR
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from duckdb_sem.llm.render import render_column
from duckdb_sem.llm.request import OperatorKind
from duckdb_sem.llm.template import parse_template
from duckdb_sem.plan.expressions import SemCall
from duckdb_sem.plan.nodes import quote

__all__ = ["first_field", "order_pairs_sql", "order_pairs_table"]


def first_field(call: SemCall) -> str | None:
    """The attribute the template of a join ``call`` names first; None where pairs have no
    first side to share (not a join, or a template of fewer than two fields).

    Example:
        >>> first_field(SemCall("Plot: {1} Review: {0}", ("r.text", "p.plot"),
        ...                     OperatorKind.JOIN))
        'p.plot'
    """
    if call.kind is not OperatorKind.JOIN:
        return None
    fields = parse_template(call.template).fields
    if len(fields) < 2 or not fields[0].isdigit() or int(fields[0]) >= len(call.args):
        return None
    return call.args[int(fields[0])]


def order_pairs_sql(pairs: str, call: SemCall) -> str:
    """``pairs`` (SQL of a join's candidate pairs) ordered by the template's first field."""
    column = first_field(call)
    if column is None:
        return pairs
    return f"SELECT * FROM ({pairs}) AS __pairs ORDER BY {quote(column)}::VARCHAR"


def order_pairs_table(pairs: pa.Table, call: SemCall) -> pa.Table:
    """A blocked join's ``pairs`` ordered by the template's first field as it renders
    (stable: pairs of one value keep their order)."""
    column = first_field(call)
    if column is None or column not in pairs.schema.names or pairs.num_rows < 2:
        return pairs
    text = pa.array(render_column(pairs.column(column)), type=pa.string())
    return pairs.take(pc.sort_indices(text))  # NULLs last
