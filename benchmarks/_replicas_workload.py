"""Workloads of ``bench_replicas``: the query set as written, and with per-call few-shot examples.

``as-written``: the Static-1 traces of Q0-Q8. Each call's shared prefix is duckdb-sem's generic
instruction (one for every filter, one per map type), the template goes in the row part, so the
whole workload has a handful of distinct prefixes of two or three blocks: every replica caches
all of them within seconds, and placement cannot change the prefix hit rate.

``few-shot``: the same traces, each arriving query carrying its own few-shot examples on every
call (``examples :=``, which join the shared prefix: ``llm.prompts.with_examples``), as a
user tuning a query writes them. A query is a (tenant, query) pair: ``TENANTS`` tenants each
run the query set with their own examples, ``EXAMPLES`` per call, taken from the call's own
rows (input) and recorded answers (output), seeded by (tenant, query, call). So prefixes are
long (hundreds to thousands of tokens), many (the whole set's KV is more than one
replica's budget), and recur when a tenant's query arrives again. The report prints their KV against
one replica's budget. Neither number was tuned on the results.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

from workloads.runner import Step

from duckdb_sem.backends.tokens import estimate_tokens
from duckdb_sem.llm.prompts import with_examples
from duckdb_sem.llm.request import Completion, LLMRequest

__all__ = ["EXAMPLES", "TENANTS", "WORKLOADS", "FewShot"]

WORKLOADS = ("as-written", "few-shot")
TENANTS = 16
EXAMPLES = 16


class FewShot:
    """Builds (tenant, query) traces lazily and answers their requests from the base answers."""

    def __init__(self, traces: dict[str, list[Step]], answers: dict[tuple[str, str], Completion]):
        self.traces = traces
        self.answers = answers
        self._base: dict[str, tuple[str, int]] = {}  # new prefix -> (base prefix, extra tokens)
        self._new: dict[tuple[int, str], dict[str, str]] = {}  # base prefix -> new, per query
        self._built: dict[tuple[int, str], list[Step]] = {}
        self._pairs = {name: self._by_prefix(steps) for name, steps in traces.items()}

    def trace(self, tenant: int, name: str) -> list[Step]:
        key = (tenant, name)
        if key not in self._built:
            new = self._prefixes(tenant, name)
            self._built[key] = [
                dataclasses.replace(s, requests=tuple(
                    dataclasses.replace(r, prefix=new[r.prefix]) for r in s.requests))
                if s.requests else s
                for s in self.traces[name]
            ]  # fmt: skip
        return self._built[key]

    def answer(self, r: LLMRequest) -> Completion:
        base, extra = self._base.get(r.prefix, (r.prefix, 0))
        c = self.answers[(base, r.row)]
        return dataclasses.replace(c, prompt_tokens=c.prompt_tokens + extra) if extra else c

    def prefix_tokens(self) -> int:
        """KV tokens of the distinct few-shot prefixes of the queries that arrived so far."""
        return sum(estimate_tokens(p) for key in self._built for p in self._prefixes(*key).values())

    def pool_prefix_tokens(self) -> int:
        """KV tokens of the distinct few-shot prefixes of every (tenant, query) arrivals draw
        from: the workload's whole prefix set."""
        return sum(
            estimate_tokens(p)
            for tenant in range(TENANTS)
            for name in self.traces
            for p in self._prefixes(tenant, name).values()
        )

    def _prefixes(self, tenant: int, name: str) -> dict[str, str]:
        key = (tenant, name)
        if key not in self._new:
            new: dict[str, str] = {}
            for i, (prefix, pairs) in enumerate(sorted(self._pairs[name].items())):
                rnd = random.Random(f"{tenant}/{name}/{i}")
                shown = rnd.sample(pairs, min(EXAMPLES, len(pairs)))
                new[prefix] = with_examples(
                    prefix, [(r.row, c.text or str(c.value)) for r, c in shown]
                )
                self._base[new[prefix]] = (
                    prefix,
                    estimate_tokens(new[prefix]) - estimate_tokens(prefix),
                )
            self._new[key] = new
        return self._new[key]

    @staticmethod
    def _by_prefix(steps: list[Step]) -> dict[str, list[tuple[LLMRequest, Completion]]]:
        out: dict[str, list[tuple[LLMRequest, Completion]]] = {}
        for step in steps:
            for r, c in zip(step.requests, step.completions, strict=True):
                out.setdefault(r.prefix, []).append((r, c))
        return out


def describe(kind: str, few: FewShot | None, budget: int) -> dict[str, Any]:
    """What the results file says about a workload's prefixes."""
    if kind == "as-written" or few is None:
        return {"workload": kind}
    return {"workload": kind, "prefix_kv_tokens": few.prefix_tokens(), "replica_kv_tokens": budget}
