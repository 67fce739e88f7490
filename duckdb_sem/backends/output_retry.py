"""The one retry loop for unparsable model output, shared by every backend.

A backend supplies one *attempt*: answer these requests (by index) on try ``n``, where try 0 is
the request as asked and a retry uses ``seed + n`` at ``RETRY_POLICY.retry_temperature`` (the
backend applies those; :func:`retry_params` gives them). :func:`answer_with_retries` calls it
again for the answers that came back with ``error`` set, up to ``policy.attempts`` more times;
answers still failing are returned as they are (``value=None``, ``error`` set) and counted, with
one logged warning per call. An aborted request (``error`` starting with ``aborted``) is never
retried or counted. Tokens of every try are summed, so usage counts the retries' work too.
Transport failures are another matter: see :mod:`.retry`.

Example:
    >>> from duckdb_sem.llm.request import Completion
    >>> tries = []
    >>> def attempt(indices, n):
    ...     tries.append((list(indices), n))
    ...     return [Completion(None, "?", 1, 1, error="bad") if i == 1 and n == 0
    ...             else Completion(i, str(i), 1, 1) for i in indices]
    >>> done, failed = answer_with_retries(2, attempt, what="demo")
    >>> [c.value for c in done], failed, tries
    ([0, 1], 0, [([0, 1], 0), ([1], 1)])
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace

from duckdb_sem.backends.base import RETRY_POLICY, RetryPolicy
from duckdb_sem.llm.request import Completion, DecodingParams

__all__ = ["answer_with_retries", "retry_params"]

log = logging.getLogger(__name__)


def retry_params(params: DecodingParams, attempt: int, policy: RetryPolicy) -> DecodingParams:
    """The decoding parameters of try ``attempt``: a new seed and, on a retry, more heat."""
    if attempt == 0:
        return params
    return replace(
        params,
        seed=params.seed + attempt,
        temperature=max(params.temperature, policy.retry_temperature),
    )


def _retryable(completion: Completion) -> bool:
    return completion.error is not None and not completion.error.startswith("aborted")


def answer_with_retries(
    n: int,
    attempt: Callable[[Sequence[int], int], Sequence[Completion]],
    *,
    what: str,
    policy: RetryPolicy = RETRY_POLICY,
) -> tuple[list[Completion], int]:
    """Answers of requests ``0..n-1`` and how many are NULL after every retry."""
    results: list[Completion | None] = [None] * n
    pending: Sequence[int] = range(n)
    for tries in range(policy.attempts + 1):
        answers = attempt(pending, tries)
        if len(answers) != len(pending):
            raise ValueError(f"{what}: {len(answers)} answers for {len(pending)} requests")
        for i, answer in zip(pending, answers, strict=True):
            earlier = results[i]
            if earlier is not None:  # count every try's tokens
                answer = replace(
                    answer,
                    prompt_tokens=answer.prompt_tokens + earlier.prompt_tokens,
                    completion_tokens=answer.completion_tokens + earlier.completion_tokens,
                )
            results[i] = answer
        pending = [i for i in pending if _retryable(_answer_at(results, i))]
        if not pending:
            break
        log.debug("%s: %d unparsable answer(s), try %d", what, len(pending), tries + 1)
    done = [_answer_at(results, i) for i in range(n)]
    failed = sum(1 for c in done if _retryable(c))
    if failed:
        log.warning("%s: %d request(s) answered NULL after retries", what, failed)
    return done, failed


def _answer_at(results: Sequence[Completion | None], i: int) -> Completion:
    answer = results[i]
    if answer is None:
        raise AssertionError(f"request {i} was never attempted")
    return answer
