"""The one interface every LLM backend implements.

A backend turns a batch of :class:`~duckdb_sem.llm.request.LLMRequest` into one
:class:`~duckdb_sem.llm.request.Completion` each, in order. It does not decide *which* requests
run when: the scheduler does, and it reads :meth:`Backend.capacity` and :meth:`Backend.load` to
keep the backend busy without handing it more than it can take (so the backend's own queue
never decides order).

Contract:
- ``complete`` is blocking and thread-safe; the scheduler calls it from worker threads, at most
  ``capacity().max_concurrent_batches`` at once, each batch at most ``capacity().max_batch``
  requests.
- Decisions (``Task.DECIDE``) are made robustly: by constrained decoding or by comparing the
  log-probabilities of the answer tokens, never by a substring search of free text.
- Malformed typed output is retried up to ``RETRY_POLICY.attempts`` times, then returned as a
  ``Completion`` with ``value=None`` and ``error`` set (the caller counts it as a warning).
- Transport failures raise :class:`~duckdb_sem.errors.BackendError` subclasses with the backend
  named in the message.
- ``backend_id`` is derived from ``answers``, a frozen :class:`~.identity.Answers` holding every
  option that can change an answer; options that cannot (threads, timeouts) stay out of it.
- ``simulated`` is True only for the simulated backend, and every output that reports results
  from it must say so.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass

from duckdb_sem.backends.identity import Answers
from duckdb_sem.backends.throughput import Throughput
from duckdb_sem.llm.request import Completion, LLMRequest

__all__ = ["RETRY_POLICY", "Answers", "Backend", "Capacity", "Load", "RetryPolicy"]


@dataclass(frozen=True, slots=True)
class Capacity:
    """How much work a backend takes at once."""

    max_batch: int  # requests in one ``complete`` call
    max_concurrent_batches: int = 1  # ``complete`` calls that may run at the same time
    max_tokens_in_flight: int | None = None  # token budget across running batches, if any
    # answers its requests one after another (llama.cpp): the executor then hands it one
    # request per call, so each answer reaches its waiters (progress, top) as it is made
    one_by_one: bool = False


@dataclass(frozen=True, slots=True)
class Load:
    """What a backend is doing now (from its own metrics where it has them)."""

    queued: int = 0
    running: int = 0


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Malformed model output: how often to retry before giving up with NULL and a warning.

    Retries use the same prompt with a different seed (temperature is raised to
    ``retry_temperature`` so a deterministic model can produce a different answer).
    """

    attempts: int = 2
    retry_temperature: float = 0.7


RETRY_POLICY = RetryPolicy()


def plain_chat(request: LLMRequest) -> list[dict[str, str]]:
    """A request as two chat turns: the instruction (system) and the rendered row (user)."""
    return [
        {"role": "system", "content": request.prefix},
        {"role": "user", "content": request.row},
    ]


class Backend(abc.ABC):
    """Base class of every backend; see the module docstring for the contract."""

    #: the spec string that built this backend, e.g. ``llama:smollm2``
    spec: str
    #: True only for simulated backends
    simulated: bool = False
    #: every option that can change an answer (see :mod:`.identity`); set by ``__init__``
    answers: Answers

    @property
    def backend_id(self) -> str:
        """Identity used in request signatures, derived from :attr:`answers` (every field)."""
        return self.answers.identity()

    @property
    def replica_identity(self) -> str:
        """:attr:`backend_id` without where the model is served (``Answers.LOCATION``): equal
        for replicas of one model (``duckdb-sem serve --backend openai:A --backend openai:B``).
        A backend that defines ``backend_id`` itself (a test double) is its own."""
        answers = getattr(self, "answers", None)
        return answers.replica_identity() if answers is not None else self.backend_id

    @abc.abstractmethod
    def complete(self, requests: Sequence[LLMRequest]) -> list[Completion]:
        """Answer every request, in order (blocking, thread-safe)."""

    @abc.abstractmethod
    def capacity(self) -> Capacity: ...

    def load(self) -> Load:
        return Load()

    @abc.abstractmethod
    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` under this backend's tokenizer (or a documented estimate)."""

    def abort(self, requests: Sequence[LLMRequest]) -> None:  # noqa: B027 - optional hook
        """Best-effort abort of submitted requests; backends without it finish them."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the model or connections."""

    def throughput(self) -> Throughput | None:
        """How fast this backend answers, and where that figure comes from (``EXPLAIN
        SEMANTIC`` turns estimated tokens into time with it); None: not known."""
        return None

    def messages(self, request: LLMRequest) -> list[dict[str, str]]:
        """The chat this backend sends for ``request`` (``EXPLAIN SEMANTIC VERBOSE`` shows it):
        the instruction as the system turn, the rendered row as the user turn. Backends that
        add few-shot examples or another layout override it."""
        return plain_chat(request)

    def describe(self) -> str:
        label = f"{self.spec} ({self.backend_id})"
        return f"SIMULATED {label}" if self.simulated else label
