"""``examples :=``: a call's own few-shot examples, their one written form and its checks.

``examples := [{'input': 'Great fun', 'output': 'yes'}, {'input': 'Dull', 'output': 'no'}]``
becomes ``(('Great fun', 'yes'), ('Dull', 'no'))`` on :class:`~.call_options.CallOptions`.
Every entry reads it from here: the binder (SQL literals, :mod:`.call_options`), the UDF
macros (the list as JSON text) and the relation API (pairs or dicts). A decision's outputs are
yes/no, ``true``/``false`` read the same; a map's are its answer text as given.

Example:
    >>> examples_option("sem_filter", ({"input": "Great fun", "output": True},))
    (('Great fun', 'true'),)
    >>> yes_no((("Great fun", "true"),))
    (('Great fun', 'yes'),)
"""

from __future__ import annotations

from collections.abc import Sequence

from duckdb_sem.errors import BindError

__all__ = [
    "EXAMPLES_FORM",
    "check_decision_examples",
    "check_examples",
    "examples_option",
    "yes_no",
]

#: how ``examples :=`` is written (every error about its shape shows it)
EXAMPLES_FORM = "examples := [{'input': 'Great fun', 'output': 'yes'}, ...]"
_YES_NO = {"yes": "yes", "no": "no", "true": "yes", "false": "no"}

Pairs = Sequence[tuple[str, str]]


def check_examples(examples: Pairs) -> None:
    """A :class:`BindError` unless there is at least one example, each non-empty text."""
    if not examples:
        raise BindError(f"examples := [] gives no example; write {EXAMPLES_FORM}")
    for pair in examples:
        if not (
            isinstance(pair, tuple)
            and len(pair) == 2
            and all(isinstance(v, str) and v.strip() for v in pair)
        ):
            raise BindError(
                f"examples := ...: {pair!r} is not an example with a non-empty input "
                f"and output; write {EXAMPLES_FORM}"
            )


def check_decision_examples(function: str, examples: Pairs) -> None:
    """A :class:`BindError` unless every output of a yes/no decision's example is one."""
    for given, output in examples:
        if output.strip().lower() not in _YES_NO:
            raise BindError(
                f"{function}: example {given!r} has output {output!r}; a yes/no "
                f"decision's examples answer 'yes' or 'no', e.g. {EXAMPLES_FORM}"
            )


def yes_no(examples: Pairs) -> tuple[tuple[str, str], ...]:
    """A decision's examples with their outputs written yes/no (``true`` -> ``yes``)."""
    return tuple((given, _YES_NO.get(output.strip().lower(), output)) for given, output in examples)


def examples_option(function: str, value: object) -> tuple[tuple[str, str], ...] | None:
    """``examples :=`` as given (a list of ``{'input': ..., 'output': ...}`` structs, as SQL
    literals or decoded JSON), as (input, output) pairs; any other shape is a
    :class:`BindError` showing the expected form."""
    if value is None:
        return None
    if not isinstance(value, tuple | list):
        raise BindError(f"{function}: examples := takes a list of structs; write {EXAMPLES_FORM}")
    pairs: list[tuple[str, str]] = []
    for item in value:
        if not isinstance(item, dict) or set(item) != {"input", "output"}:
            raise BindError(
                f"{function}: examples := ...: {item!r} is not an example; each is a struct "
                f"with exactly the fields input and output: {EXAMPLES_FORM}"
            )
        given, output = item["input"], item["output"]
        if isinstance(output, bool):  # decoded JSON of a BOOLEAN output
            output = "true" if output else "false"
        if isinstance(output, float) and output.is_integer():  # SQL's 5 is read as 5.0
            output = int(output)
        if isinstance(output, int | float):  # a typed map's number, from Python
            output = str(output)
        if not isinstance(given, str) or not isinstance(output, str):
            raise BindError(
                f"{function}: examples := ...: input and output must be text (or a "
                f"decision's true/false), got {item!r}; write {EXAMPLES_FORM}"
            )
        pairs.append((given, output))
    return tuple(pairs)
