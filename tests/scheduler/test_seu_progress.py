"""An SEU's future counts its answers per backend batch and tells its listeners; a finished
query is shown as done, then forgotten."""

from __future__ import annotations

from collections.abc import Sequence

from duckdb_sem.backends.base import Capacity
from duckdb_sem.backends.rules import RuleBackend
from duckdb_sem.llm.prompts import build_request
from duckdb_sem.llm.request import Completion, LLMRequest, OperatorKind
from duckdb_sem.scheduler.core import Scheduler
from duckdb_sem.scheduler.executor import ManualExecutor
from duckdb_sem.scheduler.queries import DONE_SHOWN_S
from duckdb_sem.scheduler.seu import SEU, SEUFuture


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _setup() -> tuple[Scheduler, ManualExecutor, _Clock]:
    executor = ManualExecutor()
    clock = _Clock()
    scheduler = Scheduler([RuleBackend(yes_if=["good"])], executor=executor, clock=clock)
    return scheduler, executor, clock


def _seu(n: int) -> SEU:
    requests = tuple(build_request(OperatorKind.FILTER, f"row {j}") for j in range(n))
    return SEU("q1", "sem_filter#1", requests, remaining_cost=50.0)


def test_listeners_hear_each_backend_batch_until_the_seu_is_done() -> None:
    scheduler, executor, _ = _setup()
    future = scheduler.submit(_seu(6))
    assert isinstance(future, SEUFuture)
    heard: list[int] = []
    future.add_answer_listener(heard.append)
    (dispatch,) = executor.started
    answer = Completion(True, "yes", 3, 1)
    for offset in (0, 2):  # two backend batches of two
        scheduler.complete(dispatch.dispatch_id, [answer, answer], offset)
    assert heard == [2, 4] and not future.done()
    scheduler.complete(dispatch.dispatch_id, [answer, answer], 4)
    assert future.done() and heard == [2, 4]  # the last batch resolves the future instead
    scheduler.close()


def test_a_listener_added_late_hears_what_was_answered_already() -> None:
    scheduler, executor, _ = _setup()
    future = scheduler.submit(_seu(3))
    assert isinstance(future, SEUFuture)
    (dispatch,) = executor.started
    scheduler.complete(dispatch.dispatch_id, [Completion(False, "no", 1, 1)], 0)
    heard: list[int] = []
    future.add_answer_listener(heard.append)
    assert heard == [1]
    scheduler.close()


def test_a_listener_added_after_two_batches_hears_each_of_them() -> None:
    # a loaded machine may run batches before the submitting thread adds its listener: the
    # progress line must still move once per batch (4, 8, ...), never jump
    scheduler, executor, _ = _setup()
    future = scheduler.submit(_seu(6))
    assert isinstance(future, SEUFuture)
    (dispatch,) = executor.started
    answer = Completion(True, "yes", 3, 1)
    for offset in (0, 2):
        scheduler.complete(dispatch.dispatch_id, [answer, answer], offset)
    heard: list[int] = []
    future.add_answer_listener(heard.append)
    assert heard == [2, 4]
    scheduler.complete(dispatch.dispatch_id, [answer, answer], 4)
    late: list[int] = []
    future.add_answer_listener(late.append)  # after the SEU is done: its batches all the same
    assert future.done() and heard == [2, 4] and late == [2, 4]
    scheduler.close()


def test_a_notify_that_overtakes_an_earlier_one_still_tells_every_batch_in_order() -> None:
    future = SEUFuture()
    heard: list[int] = []
    future.add_answer_listener(heard.append)
    future.answered = 2
    future.mark()  # batch 1, under the scheduler's lock
    future.answered = 4
    future.mark()  # batch 2
    future.notify()  # batch 2's thread tells first
    future.notify()  # batch 1's thread: nothing left to tell
    assert heard == [2, 4]


def test_a_finished_query_is_done_with_nothing_left_then_gone() -> None:
    scheduler, executor, clock = _setup()
    future = scheduler.submit(_seu(2))
    (dispatch,) = executor.started
    executor.finish(dispatch, [Completion(True, "yes", 1, 1), Completion(False, "no", 1, 1)])
    assert future.done()
    (idle,) = scheduler.status()["queries"]  # type: ignore[misc]
    assert idle["state"] == "idle" and idle["remaining_cost"] == 50.0
    scheduler.finish_query("q1")
    (done,) = scheduler.status()["queries"]  # type: ignore[misc]
    assert done["state"] == "done" and done["remaining_cost"] == 0.0
    clock.now += DONE_SHOWN_S + 1
    assert scheduler.status()["queries"] == []
    scheduler.close()


def test_a_query_that_submits_again_is_live_again() -> None:
    scheduler, executor, _ = _setup()
    scheduler.submit(_seu(1))
    executor.finish(executor.started[0], [Completion(True, "yes", 1, 1)])
    scheduler.finish_query("q1")
    scheduler.submit(_seu(2))
    (state,) = scheduler.status()["queries"]  # type: ignore[misc]
    assert state["state"] == "running"
    scheduler.close()


class _OneByOne(RuleBackend):
    """A rule backend that, like llama.cpp, answers its requests one after another."""

    def __init__(self) -> None:
        super().__init__(yes_if=["good"])
        self.sizes: list[int] = []

    def capacity(self) -> Capacity:
        return Capacity(max_batch=16, max_concurrent_batches=1, one_by_one=True)

    def complete(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        self.sizes.append(len(requests))
        return super().complete(requests)


def test_a_one_by_one_backend_gets_one_request_per_call() -> None:
    backend = _OneByOne()
    scheduler = Scheduler([backend])
    result = scheduler.submit(_seu(5)).result(timeout=30)
    scheduler.close()
    assert len(result.completions) == 5
    assert backend.sizes == [1, 1, 1, 1, 1]  # each answer reaches its waiters as it is made
