"""Scheduling policies under continuous Poisson arrivals (SIMULATED GPU time).

Every number this script prints is SIMULATED: the real :class:`Scheduler` (fusion, admission,
policies) runs on an injected clock, and a discrete-event loop stands in for the GPUs, stepping
the ``sim:`` backend's vLLM-like cost model (``duckdb_sem.backends.sim.cost_model``) for each of
two replicas. Queries are real semantic operators over the bundled Rotten Tomatoes data
(``rt_reviews.csv``, ``rt_plots.csv``); answers come from its labels, so filter selectivities
are real. Nothing sleeps: a run takes seconds.

    python benchmarks/bench_scheduler.py            # policies x load sweep -> results/
    python benchmarks/bench_scheduler.py --overhead # sidecar vs in-process cost per request

Workload (mixed, heavy-tailed as in SeqoFlow): ``short`` sem_filter over one movie's reviews;
``medium`` sem_filter over 8 movies' reviews then sem_map summarising the positive ones;
``long`` sem_join of 10 movies' reviews with their plots then sem_map over matches; ``xlong``
sem_map over 150 reviews. Each query submits one SEU (<= 64 requests) at a time, with its
estimated remaining cost (tokens, filter selectivity assumed 0.5).
"""

from __future__ import annotations

import argparse
import csv
import heapq
import itertools
import json
import math
import random
import statistics
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _results import RESULTS

from duckdb_sem.backends.base import Backend, Capacity
from duckdb_sem.backends.sim.blocks import prompt_block_hashes
from duckdb_sem.backends.sim.cost_model import CostModel, SeqState
from duckdb_sem.backends.sim.oracles import estimate_tokens
from duckdb_sem.backends.sim.profiles import SimProfile, get_profile
from duckdb_sem.data import dataset_path
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import Completion, LLMRequest, OperatorKind, Task
from duckdb_sem.scheduler.admission import ReplicaLimits
from duckdb_sem.scheduler.core import Scheduler
from duckdb_sem.scheduler.executor import Dispatch, DispatchSink
from duckdb_sem.scheduler.policies import Policy, make_policy
from duckdb_sem.scheduler.seu import SEU

SEU_ROWS = 64

# -- data -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Data:
    reviews: dict[str, list[tuple[str, bool]]]  # movie -> [(text, fresh)]
    plots: dict[str, str]
    movies: list[str]

    @staticmethod
    def load() -> Data:
        reviews: dict[str, list[tuple[str, bool]]] = {}
        with open(dataset_path("rt_reviews.csv"), newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                reviews.setdefault(row["movie"], []).append((row["text"], row["fresh"] == "True"))
        with open(dataset_path("rt_plots.csv"), newline="", encoding="utf-8") as f:
            plots = {row["movie"]: row["plot"] for row in csv.DictReader(f)}
        return Data(reviews, plots, sorted(reviews))


# -- queries: generators of SEUs ----------------------------------------------------------------

FILTER = "The review '{0}' is positive"
SUMMARY = "Summarise in one sentence what the critic liked: {0}"
JOIN = "The review '{0}' is about the movie with this plot: {1}"
EXTRACT = "List the actors, scenes and adjectives the critic mentions in: {0}"


def _req(kind: OperatorKind, rendered: str, max_tokens: int | None = None) -> LLMRequest:
    return build_request(kind, rendered, max_tokens=max_tokens)


def _cost(reqs: Sequence[LLMRequest], output: int | None = None) -> float:
    """Estimated cost in tokens: prompt + a decode token weighs like 8 prompt tokens."""
    total = 0.0
    for r in reqs:
        out = 1 if r.output.task is Task.DECIDE else (output or r.params.max_tokens)
        total += estimate_tokens(r.prefix) + estimate_tokens(r.row) + 8 * out
    return total


# Answers: the label for a decision (fresh / same movie), generated text for maps.
LABELS: dict[str, Any] = {}


def _labelled(
    kind: OperatorKind, rendered: str, label: Any, max_tokens: int | None = None
) -> LLMRequest:
    r = _req(kind, rendered, max_tokens)
    LABELS[r.row] = label
    return r


Query = Iterator[tuple[list[LLMRequest], float]]  # yields (SEU requests, remaining cost)


def _chunks(reqs: list[LLMRequest], later: float) -> Iterator[tuple[list[LLMRequest], float]]:
    for i in range(0, len(reqs), SEU_ROWS):
        yield reqs[i : i + SEU_ROWS], _cost(reqs[i:], 24) + later


def q_short(d: Data, rnd: random.Random) -> Iterator[tuple[list[LLMRequest], float]]:
    movie = rnd.choice(d.movies)
    reqs = [_labelled(OperatorKind.FILTER, FILTER.format(t), ok) for t, ok in d.reviews[movie]]
    yield from _chunks(reqs, 0.0)


def q_medium(
    d: Data, rnd: random.Random, movies: int = 8
) -> Iterator[tuple[list[LLMRequest], float]]:
    rows = [r for m in rnd.sample(d.movies, movies) for r in d.reviews[m]]
    filt = [_labelled(OperatorKind.FILTER, FILTER.format(t), ok) for t, ok in rows]
    later = _cost([_req(OperatorKind.MAP, SUMMARY.format(t), 48) for t, _ in rows], 24) * 0.5
    yield from _chunks(filt, later)
    kept = [t for t, ok in rows if ok]
    yield from _chunks(
        [_labelled(OperatorKind.MAP, SUMMARY.format(t), None, 48) for t in kept], 0.0
    )


def q_long(
    d: Data, rnd: random.Random, movies: int = 10
) -> Iterator[tuple[list[LLMRequest], float]]:
    chosen = rnd.sample(d.movies, movies)
    pairs = [(t, m, p) for m in chosen for t, _ in d.reviews[m] for p in chosen]
    join = [_labelled(OperatorKind.JOIN, JOIN.format(t, d.plots[p]), m == p) for t, m, p in pairs]
    matched = [t for t, m, p in pairs if m == p]
    maps = [_labelled(OperatorKind.MAP, SUMMARY.format(t), None, 48) for t in matched]
    yield from _chunks(join, _cost(maps, 24))
    yield from _chunks(maps, 0.0)


def q_xlong(
    d: Data, rnd: random.Random, rows: int = 150
) -> Iterator[tuple[list[LLMRequest], float]]:
    texts = [t for m in d.movies for t, _ in d.reviews[m]]
    chosen = rnd.sample(texts, rows)
    yield from _chunks(
        [_labelled(OperatorKind.MAP, EXTRACT.format(t), None, 64) for t in chosen], 0.0
    )


MIX: list[tuple[str, float, Callable[[Data, random.Random], Query]]] = [
    ("short", 0.50, q_short),
    ("medium", 0.30, q_medium),
    ("long", 0.15, q_long),
    ("xlong", 0.05, q_xlong),
]


def sample_mix(rnd: random.Random) -> tuple[str, Callable[[Data, random.Random], Query]]:
    u, acc = rnd.random(), 0.0
    for name, p, make in MIX:
        acc += p
        if u < acc:
            return name, make
    return MIX[-1][0], MIX[-1][2]


# -- the simulated GPUs ------------------------------------------------------------------------


class _SimReplica(Backend):
    """Identity and capacity of one simulated replica (the event loop does the work)."""

    simulated = True

    def __init__(self, profile: SimProfile) -> None:
        self.profile = profile
        self.spec = f"sim:{profile.name}"

    @property
    def backend_id(self) -> str:
        return f"sim:{self.profile.model}:bench"

    def complete(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        raise AssertionError("driven by the event loop")

    def capacity(self) -> Capacity:
        return Capacity(max_batch=self.profile.max_num_seqs, max_concurrent_batches=8)

    def count_tokens(self, text: str) -> int:
        return estimate_tokens(text)


@dataclass(eq=False)
class _GPU:
    model: CostModel
    running: list[SeqState] = field(default_factory=list)
    waiting: deque[SeqState] = field(default_factory=deque)
    busy: bool = False
    busy_s: float = 0.0


def _answer(r: LLMRequest) -> Completion:
    label = LABELS.get(r.row)
    prompt = estimate_tokens(r.prefix) + estimate_tokens(r.row)
    if r.output.task is Task.DECIDE:
        return Completion(bool(label), "yes" if label else "no", prompt, 1)
    words = 12 + len(r.row) % 20  # a deterministic answer length
    return Completion(
        "answer " * words, "answer " * words, prompt, min(r.params.max_tokens, words + 1)
    )


class EventLoop:
    """Discrete-event simulation: query arrivals, GPU steps, SEU completions."""

    def __init__(
        self,
        policy: Policy,
        *,
        profile: str = "default",
        replicas: int = 2,
        max_inflight: int = 128,
        fusion: bool = True,
        cache: Any = None,
    ) -> None:
        self.now = 0.0
        self.on_done: Callable[[str, str], None] | None = None
        self.events: list[tuple[float, int, str, Any]] = []
        self._n = itertools.count()
        prof = get_profile(profile)
        self.gpus = [_GPU(CostModel(prof)) for _ in range(replicas)]
        self._seq_ids = itertools.count()
        self._owner: dict[int, tuple[int, int]] = {}  # seq id -> (dispatch id, index)
        self._dispatches: dict[int, tuple[Dispatch, list[Completion | None], int]] = {}
        backends = [_SimReplica(prof) for _ in range(replicas)]
        limits = [ReplicaLimits(8, max_inflight, None) for _ in backends]
        self.scheduler = Scheduler(
            backends,
            policy=policy,
            clock=lambda: self.now,
            executor=self,
            limits=limits,
            fusion=fusion,
            cache=cache,
        )
        self.template_tokens = prof.template_tokens
        self.block_size = prof.block_size
        self.latencies: dict[str, list[float]] = {}
        self.done = 0

    def at(self, t: float, kind: str, payload: Any) -> None:
        heapq.heappush(self.events, (t, next(self._n), kind, payload))

    # Executor protocol
    def start(self, dispatch: Dispatch, backend: Backend, sink: DispatchSink) -> None:
        gpu = self.gpus[dispatch.replica]
        self._dispatches[dispatch.dispatch_id] = (
            dispatch,
            [None] * len(dispatch.requests),
            len(dispatch.requests),
        )
        for i, r in enumerate(dispatch.requests):
            answer = _answer(r)
            prompt = answer.prompt_tokens + self.template_tokens
            hashes = prompt_block_hashes(r.prefix, r.row, prompt_tokens=prompt,
                                         template_tokens=self.template_tokens,
                                         block_size=self.block_size)  # fmt: skip
            seq = SeqState(
                seq_id=next(self._seq_ids),
                prompt_tokens=prompt,
                output_tokens=answer.completion_tokens,
                block_hashes=hashes,
                arrival=self.now,
            )
            self._owner[seq.seq_id] = (dispatch.dispatch_id, i)
            gpu.waiting.append(seq)
        if not gpu.busy:
            self._step(dispatch.replica)

    def close(self) -> None:
        pass

    def _step(self, index: int) -> None:
        gpu = self.gpus[index]
        result = gpu.model.step(gpu.running, gpu.waiting, self.now)
        if result is None:
            gpu.busy = False
            return
        gpu.busy = True
        gpu.busy_s += result.duration
        self._stepped(result)
        self.at(self.now + result.duration, "step", (index, result.finished))

    def _stepped(self, result: Any) -> None:
        """A GPU step finished planning (a subclass counts what it needs, e.g. prefix hits)."""

    def _finish_seqs(self, finished: Sequence[SeqState]) -> None:
        for seq in finished:
            did, i = self._owner.pop(seq.seq_id)
            dispatch, answers, missing = self._dispatches[did]
            answers[i] = _answer(dispatch.requests[i])
            missing -= 1
            self._dispatches[did] = (dispatch, answers, missing)
            if missing == 0:
                del self._dispatches[did]
                self.scheduler.complete(did, [a for a in answers if a is not None])

    def add_query(self, t: float, qid: str, kind: str, query: Query) -> None:
        self.at(t, "arrive", (qid, kind, query))

    def _next_seu(self, qid: str, kind: str, query: Query, arrived: float) -> None:
        step = next(query, None)
        if step is None:
            self.latencies.setdefault(kind, []).append(self.now - arrived)
            self.latencies.setdefault("all", []).append(self.now - arrived)
            self.done += 1
            self.scheduler.finish_query(qid)
            if self.on_done is not None:
                self.on_done(qid, kind)
            return
        reqs, remaining = step
        future = self.scheduler.submit(SEU(qid, kind, tuple(reqs), remaining, "bench"))
        future.add_done_callback(lambda _f: self.at(self.now, "seu", (qid, kind, query, arrived)))

    def run(self) -> float:
        while self.events:
            t, _, kind, payload = heapq.heappop(self.events)
            self.now = t
            if kind == "arrive":
                qid, qkind, query = payload
                self._next_seu(qid, qkind, query, t)
            elif kind == "seu":
                self._next_seu(*payload)
            else:
                index, finished = payload
                self._finish_seqs(finished)
                self._step(index)
        return self.now


# -- experiments ---------------------------------------------------------------------------------

POLICY_SPECS: dict[str, dict[str, Any]] = {
    "fcfs": {},
    "srtf": {"aging_rate": 0.0},
    "srtf+aging": {"aging_rate": 2000.0},
    "mlfq": {"quantum": 4096.0},
    "preemptdb": {"threshold": 20000.0},
    "joint": {"aging_rate": 2000.0, "long_share": 0.2},
}


def build_policy(label: str) -> Policy:
    name = label.split("+")[0]
    return make_policy(name, **POLICY_SPECS[label])


def workload(data: Data, n: int, rate: float, seed: int) -> list[tuple[float, str, Query]]:
    rnd = random.Random(seed)
    t, out = 0.0, []
    for _ in range(n):
        t += rnd.expovariate(rate)
        kind, make = sample_mix(rnd)
        out.append((t, kind, make(data, random.Random(rnd.random()))))
    return out


def run_once(
    policy: str, data: Data, n: int, rate: float, seed: int, **kw: Any
) -> dict[str, float]:
    loop = EventLoop(build_policy(policy), **kw)
    first = None
    for i, (t, kind, query) in enumerate(workload(data, n, rate, seed)):
        first = first if first is not None else t
        loop.add_query(t, f"q{i}", kind, query)
    end = loop.run()
    lat = sorted(loop.latencies["all"])
    usage = loop.scheduler.usage
    return {
        "p50": statistics.median(lat),
        "p99": lat[min(len(lat) - 1, math.ceil(0.99 * len(lat)) - 1)],
        "mean": statistics.fmean(lat),
        "throughput": len(lat) / (end - (first or 0.0)),
        "short_p50": statistics.median(loop.latencies.get("short", [0.0])),
        "physical_calls": usage.physical_calls,
        "virtual_calls": usage.virtual_calls,
        "gpu_util": sum(g.busy_s for g in loop.gpus) / (len(loop.gpus) * end),
    }


def capacity(data: Data, n: int, seed: int) -> float:
    """Queries per second the simulated deployment sustains (everything arrives at once)."""
    return run_once("fcfs", data, n, 1e6, seed)["throughput"]


def sweep(args: argparse.Namespace) -> None:
    data = Data.load()
    mu = capacity(data, args.queries, args.seed)
    print(f"SIMULATED capacity (FCFS, all queries at once): {mu:.2f} queries/s", flush=True)
    rows = []
    for load in args.loads:
        rate = load * mu
        for policy in args.policies:
            started = time.perf_counter()
            vals: list[dict[str, float]] = [
                run_once(policy, data, args.queries, rate, args.seed + s) for s in range(args.seeds)
            ]
            avg = {k: statistics.fmean(v[k] for v in vals) for k in vals[0]}
            row = {
                "load": load,
                "rate_qps": round(rate, 3),
                "policy": policy,
                **{k: round(v, 3) for k, v in avg.items()},
            }
            rows.append(row)
            print(
                f"load {load:4.2f} {policy:11s} P50 {avg['p50']:7.2f}s P99 {avg['p99']:7.2f}s "
                f"thr {avg['throughput']:.2f} q/s util {avg['gpu_util']:.2f} "
                f"({time.perf_counter() - started:.1f}s)",
                flush=True,
            )
    write_results("scheduler", rows, args)
    plot(rows, args)


def write_results(name: str, rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    with open(RESULTS / f"{name}.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    cols = list(rows[0])
    lines = [
        f"# {name}: SIMULATED (sim cost model, profile {args.profile}, {args.replicas} replicas)",
        "",
        f"Command: `python benchmarks/{Path(sys.argv[0]).name} {' '.join(sys.argv[1:])}`",
        "",
        "| " + " | ".join(cols) + " |",
        "|" + "---|" * len(cols),
    ]
    lines += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows]
    (RESULTS / f"{name}.md").write_text("\n".join(lines) + "\n")


def plot(rows: list[dict[str, Any]], args: argparse.Namespace) -> None:
    plot_latency(rows, "policy", args.policies, "load",
                 "offered load (fraction of FCFS capacity)", "scheduler")  # fmt: skip


def plot_latency(
    rows: list[dict[str, Any]], series: str, names: list[str], x: str, xlabel: str, out: str
) -> None:
    """P50, P99 and throughput against offered load, one line per ``rows[series]`` value in
    ``names`` (``x``: the column of the load); writes ``RESULTS/<out>.png``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for name in names:
        mine = [r for r in rows if r[series] == name]
        for ax, key in zip(axes, ("p50", "p99", "throughput"), strict=True):
            ax.plot([r[x] for r in mine], [r[key] for r in mine], marker="o", label=name)
    for ax, title in zip(
        axes, ("P50 latency (s)", "P99 latency (s)", "throughput (queries/s)"), strict=True
    ):
        ax.set_title(f"{title} - SIMULATED")
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
    axes[0].set_yscale("log")
    axes[1].set_yscale("log")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(RESULTS / f"{out}.png", dpi=110)
    plt.close(fig)


# -- sidecar overhead ---------------------------------------------------------------------------


def overhead(args: argparse.Namespace) -> None:
    """Wall time per request through the in-process scheduler and through the sidecar (real)."""
    from duckdb_sem.backends.rules import RuleBackend
    from duckdb_sem.scheduler.sidecar_client import SidecarClient
    from duckdb_sem.scheduler.sidecar_server import SidecarServer

    rows = []
    for size in (1, 64):
        for path in ("in-process", "sidecar"):
            scheduler = Scheduler([RuleBackend(yes_if=["good"])], policy="srtf")
            server = client = None
            target: Any = scheduler
            if path == "sidecar":
                server = SidecarServer(scheduler, "127.0.0.1:0").start()
                client = target = SidecarClient(server.url)
            seus = max(20, 2000 // size)
            for warm in (True, False):
                started = time.perf_counter()
                for i in range(seus if not warm else 5):
                    reqs = tuple(
                        _req(OperatorKind.FILTER, f"{warm} {i} {j} good row") for j in range(size)
                    )
                    target.submit(SEU(f"q{i}", "f", reqs, 1.0)).result()
                elapsed = time.perf_counter() - started
            per_req = elapsed / (seus * size) * 1e6
            per_seu = elapsed / seus * 1e6
            rows.append(
                {
                    "path": path,
                    "requests_per_seu": size,
                    "us_per_seu": round(per_seu, 1),
                    "us_per_request": round(per_req, 1),
                }
            )
            print(rows[-1], flush=True)
            if client is not None:
                client.close()
            if server is not None:
                server.shutdown()
            scheduler.close()
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "sidecar_overhead.json").write_text(json.dumps(rows, indent=1) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--overhead", action="store_true", help="measure sidecar overhead instead")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--profile", default="default")
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--loads", type=float, nargs="+", default=[0.2, 0.4, 0.6, 0.8, 0.9, 1.0])
    ap.add_argument("--policies", nargs="+", default=list(POLICY_SPECS))
    args = ap.parse_args()
    if args.overhead:
        overhead(args)
    else:
        sweep(args)


if __name__ == "__main__":
    main()
