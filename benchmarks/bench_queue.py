"""Queue cost per policy at 10,000 queued SEUs: the heap queues against the list they replaced.

Information, not a gate. Fills each policy's queue with ``--seus`` SEUs (random costs,
arrivals, attained service; 1 in 10 gets a fusion bump while queued), then measures the
steady state the scheduler sees under load: pop the next SEU, dispatch it, queue a new one, at
that queue length. The *list* baseline is the queue as it was (a minimum over the whole queue
per pop; ``joint`` also sorted every queued cost per pop for its long/short split), kept here
only as the reference. Both pop the same SEUs in the same order (checked), so the times are
comparable. Results go to ``benchmarks/results/queue.md`` and ``queue.json``.

    python benchmarks/bench_queue.py                # 10,000 queued, 500 pops per policy
    python benchmarks/bench_queue.py --seus 1000 --pops 500
"""

from __future__ import annotations

import argparse
import json
import random
import time
from typing import Any

from _results import RESULTS

from duckdb_sem.scheduler.policies import POLICIES, Policy, QueuedSEU, make_policy


class ListQueue(Policy):
    """The queue before the heaps: a minimum over every queued SEU per pop."""

    def __init__(self, policy: Any) -> None:
        self.inner = policy
        self.name = f"{policy.name} (list)"
        self._items: list[QueuedSEU] = []

    def _key(self, item: QueuedSEU, now: float) -> tuple[float, ...]:
        p = self.inner
        if p.name in ("srtf", "joint"):
            key = (item.effective_cost - p.aging_rate * max(0.0, now - item.arrival),)
        elif p.name == "fcfs":
            key = (item.query_arrival,)
        elif p.name == "mlfq":
            key = (float(p.level(item.attained)), item.arrival)
        else:
            key = (1.0 if item.effective_cost > p.threshold else 0.0, item.query_arrival)
        return (*key, item.query_arrival, item.seq)

    def push(self, item: QueuedSEU) -> None:
        self._items.append(item)

    def pop(self, now: float) -> QueuedSEU | None:
        pool = self._items
        if self.inner.name == "joint":
            costs = sorted(i.effective_cost for i in self._items)
            cut = costs[int(self.inner.long_quantile * (len(costs) - 1))]
            long = [i for i in self._items if i.effective_cost > cut]
            if long and self.inner.long_fraction() < self.inner.long_share:
                pool = long
            best = min(pool, key=lambda i: self._key(i, now))
            self.inner._last_long[best.seq] = best in long
        else:
            best = min(pool, key=lambda i: self._key(i, now))
        self._items.remove(best)
        return best

    def remove(self, item: QueuedSEU) -> None:
        self._items.remove(item)

    def __len__(self) -> int:
        return len(self._items)

    def items(self) -> list[QueuedSEU]:
        return list(self._items)

    def dispatched(self, item: QueuedSEU, now: float) -> None:
        if self.inner.name == "joint":
            self.inner.dispatched(item, now)


def _items(n: int, seed: int) -> list[QueuedSEU]:
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        query = rnd.randrange(n // 4 + 1)
        item = QueuedSEU(
            query_id=f"q{query}",
            arrival=i * 0.001,
            query_arrival=query * 0.004,
            remaining_cost=rnd.lognormvariate(7, 1.5),
            size=64,
            tokens=rnd.randrange(500, 20_000),
            attained=rnd.lognormvariate(8, 2),
        )
        out.append(item)
    return out


def _run(policy: Policy, seus: int, pops: int) -> tuple[float, list[int]]:
    """Seconds per pop-dispatch-push at a queue of ``seus``, and the popped sequence numbers."""
    queued = _items(seus, seed=1)
    fresh = _items(pops, seed=2)
    for item in queued:
        policy.push(item)
    for item in queued[::10]:  # fusion while queued
        item.contribution += 1.0
        policy.update(item)
    order = []
    now = seus * 0.001
    started = time.perf_counter()
    for i in range(pops):
        now += 0.001
        item = policy.pop(now)
        assert item is not None
        policy.dispatched(item, now)
        order.append(item.seq - queued[0].seq)  # creation index: comparable across runs
        new = fresh[i]
        new.arrival = now
        policy.push(new)
    return (time.perf_counter() - started) / pops, order


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seus", type=int, default=10_000)
    parser.add_argument("--pops", type=int, default=500)
    args = parser.parse_args()
    rows = []
    for name in POLICIES:
        heap_s, heap_order = _run(make_policy(name), args.seus, args.pops)
        list_s, list_order = _run(ListQueue(make_policy(name)), args.seus, args.pops)
        same = heap_order == list_order
        rows.append(
            {
                "policy": name,
                "queued": args.seus,
                "heap_us_per_pop": round(heap_s * 1e6, 2),
                "list_us_per_pop": round(list_s * 1e6, 2),
                "speedup": round(list_s / heap_s, 1),
                "same_order": same,
            }
        )
        print(rows[-1], flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "queue.json").write_text(json.dumps(rows, indent=2) + "\n")
    lines = [
        f"# Queue cost at {args.seus:,} queued SEUs ({args.pops:,} pop-dispatch-push steps)",
        "",
        "Information, not a gate. `python benchmarks/bench_queue.py`; the list baseline is the",
        "queue before the heaps (a minimum over the queue per pop; joint sorted every cost).",
        "",
        "| policy | heap, us per pop | list, us per pop | speedup | same order |",
        "|---|---|---|---|---|",
        *(
            f"| `{r['policy']}` | {r['heap_us_per_pop']} | {r['list_us_per_pop']} | "
            f"{r['speedup']}x | {'yes' if r['same_order'] else 'NO'} |"
            for r in rows
        ),
        "",
    ]
    (RESULTS / "queue.md").write_text("\n".join(lines))


if __name__ == "__main__":
    main()
