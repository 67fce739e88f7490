"""Cascades for ``sem_filter`` and ``sem_join``: a cheap helper decides the rows (a join's
candidate pairs) it is sure of, the target the rest.

An approximate plan (only when the query allows it: ``runtime.approximation``) may run a
``SemFilter`` over relational input as a cascade:

1. :func:`cascade_sem_operators` (when the query is prepared, so EXPLAIN SEMANTIC shows it): a
   repeatable sample of ``filter_sample`` input rows is scored by the helper
   (``runtime.cascade_helpers``) and labelled by the target (its answers are cached, so the run
   asks none of them again); :func:`~duckdb_sem.estimator.cascade_thresholds.learn_cascade`
   picks the accept and reject thresholds whose lower confidence bounds meet the precision and
   recall targets at ``confidence`` (what that guarantees: ``estimator.cascade_thresholds``).
   The SemFilter gets a :class:`~duckdb_sem.plan.cascade.Cascade`; a filter over fewer than
   ``min_filter_rows`` rows, whose sample holds no positive, or whose helper decides nothing
   and whose labelled window could never hold the positives the recall bound needs, stays on
   the target alone.
   A SemJoin over relational inputs is cascaded alike, on its candidate pairs (the blocked
   ones, or those its relational condition allows); the helper is told which arguments come
   from which side (an embedding helper scores the cosine of the two sides' texts).
2. :func:`run_cascade` (each SEU): the helper scores the batch; ``seu_sample`` of its rows
   (at least 8) go to the target and join the labelled rows (the latest ``window`` are kept),
   the thresholds are re-learned on them, so they follow the data as the plan does; the helper
   decides the rows outside the band and the target answers the rest.

Example: 5,000 reviews, a helper that decides 70% of the sampled rows: the target answers
about 100 + 5% + 30% of the rows, ~1,850 calls instead of 5,000. The bounds narrow as the
labelled window grows, so the first SEUs leave more rows to the target than the later ones.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from duckdb_sem.estimator.bounds import recall_rank
from duckdb_sem.estimator.cascade_thresholds import CascadeThresholds, learn_cascade
from duckdb_sem.llm.request import OperatorKind
from duckdb_sem.optimizer.cost import operator_signature
from duckdb_sem.plan.cascade import Cascade
from duckdb_sem.plan.nodes import Node, SemFilter, SemJoin, quote
from duckdb_sem.runtime.approximation import Approximation, decline
from duckdb_sem.runtime.blocking import blocked_pairs
from duckdb_sem.runtime.cascade_helpers import Helper, Sides
from duckdb_sem.runtime.plan_sql import join_sql

__all__ = ["Cascades", "Learner", "cascade_sem_operators", "run_cascade"]

log = logging.getLogger(__name__)

Target = Callable[[Sequence[pa.Array]], pa.Array]  # the target's answers for some rows


@dataclass
class Learner:
    """One cascaded operator's labelled rows and current thresholds (mutable, per query)."""

    helper: Helper
    approximation: Approximation
    thresholds: CascadeThresholds
    sides: Sides | None = None  # a sem_join's: which arguments come from which side
    scores: deque[float] = field(default_factory=deque)
    labels: deque[bool] = field(default_factory=deque)
    seus: int = 0
    history: list[CascadeThresholds] = field(default_factory=list)  # after each SEU
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, scores: Sequence[float], labels: Sequence[bool | None]) -> None:
        """Label more rows, keep the latest ``window``, and re-learn the thresholds."""
        with self.lock:
            for s, lab in zip(scores, labels, strict=True):
                self.scores.append(float(s))
                self.labels.append(bool(lab))
            while len(self.scores) > self.approximation.window:
                self.scores.popleft()
                self.labels.popleft()
            learned = learn_cascade(list(self.scores), list(self.labels),
                                    precision=self.approximation.filter_precision,
                                    recall=self.approximation.filter_recall,
                                    confidence=self.approximation.confidence)  # fmt: skip
            if learned is not None:
                self.thresholds = learned


class Cascades:
    """A query's cascaded filters, by operator signature (``QueryContext.cascades``)."""

    def __init__(self) -> None:
        self.learners: dict[str, Learner] = {}


def _take(args: Sequence[pa.Array], at: Sequence[int]) -> list[pa.Array]:
    index = pa.array(list(at), type=pa.int64())
    return [a.take(index) for a in args]


def _label(target: Target, args: Sequence[pa.Array], at: Sequence[int]) -> list[bool | None]:
    if not at:
        return []
    answers: list[bool | None] = target(_take(args, at)).to_pylist()
    return answers


def learn_rows(con: Any, node: SemFilter | SemJoin, input_sql: str, helper: Helper,
               target: Target, query: Any, approximation: Approximation,
               sides: Sides | None = None) -> Learner | None:  # fmt: skip
    """The cascade of ``node`` over the rows of ``input_sql`` (a filter's input, a join's
    candidate pairs) for this query, or None where the target alone is the plan."""
    ((rows,),) = con.sql(f"SELECT count(*) FROM ({input_sql})").fetchall()
    if rows < approximation.min_filter_rows:
        decline(query, node.label(), f"{rows:,} rows, under the "
                f"{approximation.min_filter_rows:,} a cascade needs: no cascade")  # fmt: skip
        return None
    sample = con.sql(
        f"SELECT * FROM ({input_sql}) AS __sem_cascade_input "
        f"USING SAMPLE reservoir({approximation.filter_sample} ROWS) REPEATABLE (7)"
    ).to_arrow_table()
    args = [sample.column(a).combine_chunks() for a in node.call.args]
    scores = helper.scores(node.call.template, args, query, sides=sides)
    at = [i for i, s in enumerate(scores) if s is not None]
    labels = _label(target, args, at)
    scored = [float(scores[i]) for i in at]  # type: ignore[arg-type]
    learned = learn_cascade(scored, labels, precision=approximation.filter_precision,
                            recall=approximation.filter_recall,
                            confidence=approximation.confidence)  # fmt: skip
    if learned is None:
        decline(query, node.label(), f"no positive among {len(at):,} sampled rows: no cascade")
        return None
    # a helper that decides nothing now, whose window will never hold the positives the recall
    # bound needs at this confidence, would only add its calls: the target alone is the plan
    window = min(approximation.window, rows)
    expected = math.floor(learned.positives / learned.rows * window)
    delta = 1.0 - approximation.confidence
    if learned.helper_share == 0.0 and recall_rank(expected, approximation.filter_recall,
                                                   delta / 2) is None:  # fmt: skip
        decline(query, node.label(), f"{expected:,} positives in a full window of {window:,} "
                f"rows cannot bound recall {approximation.filter_recall:.2f} at confidence "
                f"{approximation.confidence:.2f}, and the helper decides no row: no "
                "cascade")  # fmt: skip
        return None
    learner = Learner(helper, approximation, learned, sides)
    learner.add(scored, labels)
    return learner


def cascade_sem_operators(con: Any, plan: Node, engine: Any, query: Any, helper: Helper,
                          approximation: Approximation) -> Node:  # fmt: skip
    """``plan`` with each SemFilter over relational input, and each SemJoin over relational
    inputs (its candidate pairs, after blocking), cascaded where it pays (see module)."""
    # imported here: execute_plan imports this module to run the cascade
    from duckdb_sem.runtime.execute_plan import relational_sql

    if query.cascades is None:
        query.cascades = Cascades()

    def cascaded(node: Node) -> Node:
        if not isinstance(node, SemFilter | SemJoin) or node.cascade is not None:
            return node
        if node.call.options.per_row is not None:  # asks rows already, not pairs
            return node
        if any(n.semantic for c in node.children for n in c.walk()):
            return node
        call = node.call

        def target(args: Sequence[pa.Array]) -> pa.Array:
            return engine.run_operator(call.kind, call.template, args,
                                       output_type=call.output_type, query=query,
                                       label=f"{node.label().split()[0]} cascade sample",
                                       options=call.options)  # fmt: skip

        if isinstance(node, SemFilter):
            if call.kind is not OperatorKind.FILTER:
                return node
            learner = learn_rows(con, node, relational_sql(con, node.child), helper, target,
                                 query, approximation)  # fmt: skip
        else:
            learner = _learn_pairs(con, node, engine, query, helper, target, approximation)
        if learner is None:
            return node
        query.cascades.learners[operator_signature(call)] = learner
        return dataclasses.replace(node, cascade=_annotation(learner, node))

    return plan.transform(cascaded)


def _learn_pairs(con: Any, node: SemJoin, engine: Any, query: Any, helper: Helper,
                 target: Target, approximation: Approximation) -> Learner | None:  # fmt: skip
    """A join's cascade, learned on its candidate pairs: the blocked ones, or all the pairs
    its relational condition allows."""
    from duckdb_sem.runtime.execute_plan import relational_sql

    left, right = relational_sql(con, node.left), relational_sql(con, node.right)
    sides = (tuple(i for i, a in enumerate(node.call.args) if a in node.left.attrs),
             tuple(i for i, a in enumerate(node.call.args) if a not in node.left.attrs))  # fmt: skip
    if node.blocking is None:
        pairs = join_sql(left, right, node.condition.sql if node.condition else None)
        return learn_rows(con, node, pairs, helper, target, query, approximation, sides)
    table = blocked_pairs(con, node, left, right, engine, query)
    name = f"__sem_cascade_pairs_{id(table):x}"
    con.register(name, table)
    try:
        return learn_rows(con, node, f"SELECT * FROM {quote(name)}", helper, target, query,
                          approximation, sides)  # fmt: skip
    finally:
        con.unregister(name)


def _annotation(learner: Learner, node: SemFilter | SemJoin) -> Cascade:
    t, a = learner.thresholds, learner.approximation
    return Cascade(
        helper=learner.helper.name, accept=t.accept, reject=t.reject,
        precision_target=a.filter_precision, recall_target=a.filter_recall,
        sample_precision=t.sample_precision, sample_recall=t.sample_recall,
        helper_share=t.helper_share, sample_rows=t.rows, sample_positives=t.positives,
        confidence=a.confidence, precision_bound=t.precision_bound or 0.0,
        recall_bound=t.recall_bound or 0.0, seu_sample=a.seu_sample,
        operator="sem_join" if isinstance(node, SemJoin) else "sem_filter",
    )  # fmt: skip


def run_cascade(
    node: SemFilter | SemJoin, args: Sequence[pa.Array], target: Target, query: Any
) -> pa.Array:
    """The operator's answers for one SEU's rows (a join's: candidate pairs): the helper's
    where it is sure, else the target's (see module); without the query's learner (a plan
    built elsewhere) the target's alone."""
    cascades = getattr(query, "cascades", None)
    learner = cascades.learners.get(operator_signature(node.call)) if cascades else None
    if learner is None:
        return target(args)
    n = len(args[0]) if args else 0
    scores = learner.helper.scores(node.call.template, args, query, sides=learner.sides)
    scored = [i for i, s in enumerate(scores) if s is not None]
    share = learner.approximation.seu_sample
    take = min(len(scored), max(8, math.ceil(share * n))) if share > 0 else 0
    rng = np.random.default_rng(7 + learner.seus)
    sample = sorted(int(i) for i in rng.choice(scored, size=take, replace=False)) if take else []
    answers: list[bool | None] = [None] * n
    labels = _label(target, args, sample)
    for i, lab in zip(sample, labels, strict=True):
        answers[i] = lab
    learner.add([float(scores[i]) for i in sample], labels)
    learner.seus += 1
    learner.history.append(learner.thresholds)
    sampled = set(sample)
    ask: list[int] = []
    decided = 0
    for i, s in enumerate(scores):
        if i in sampled:
            continue
        verdict = None if s is None else learner.thresholds.decide(s)
        if verdict is None:
            ask.append(i)
        else:
            answers[i] = verdict
            decided += 1
    for i, lab in zip(ask, _label(target, args, ask), strict=True):
        answers[i] = lab
    query.add(cascade_helper_rows=decided, cascade_target_rows=len(sample) + len(ask))
    return pa.array(answers, type=pa.bool_())
