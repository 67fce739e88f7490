"""The prompts of ``sem_topk``'s pairwise and listwise methods, and how a listwise answer is read.

Both state the criterion once (the call's template with each field written as its column's
name) and show each candidate as its fields' values, as LOTUS's comparisons and RankGPT's
windows do; the row's text is not repeated around every candidate.

- A *pair* (``method := 'pairwise'``) is a yes/no decision about two candidates, ``A`` and
  ``B``: "does A fit better than B?". It is a join-kind decision (two sides), so backends
  calibrate it on content-free pairs and share the KV cache of a common ``A``.
- A *window* (``method := 'listwise'``) is one generated answer ranking ``w`` numbered
  candidates: ``[2] > [1] > [3]``. :func:`parse_permutation` reads it robustly.

Example:
    >>> pair_template("Is this review enthusiastic? {0}", ["text"]).source.splitlines()[1]
    'A: {0}'
    >>> parse_permutation("[2] > [3] > [1]", 3)
    ((1, 2, 0), True)
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from duckdb_sem.llm.template import Template, parse_template

__all__ = ["criterion", "pair_template", "parse_permutation", "window_template"]

_NUMBER = re.compile(r"\d+")


def criterion(template: str, names: Sequence[str]) -> str:
    """The positional ``template`` with field ``{i}`` written ``<names[i]>``: what every
    candidate is judged by (``'Is this review enthusiastic? <text>'``)."""
    parsed = parse_template(template)
    out = [parsed.pieces[0]]
    for field, piece in zip(parsed.fields, parsed.pieces[1:], strict=True):
        out += [f"<{names[int(field)]}>", piece]
    return "".join(out).strip()


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _item(names: Sequence[str], offset: int) -> str:
    """One candidate's fields, positions ``offset``.. (a single field: its value alone)."""
    if len(names) == 1:
        return "{" + str(offset) + "}"
    return "; ".join(f"{_escape(n)}: {{{offset + i}}}" for i, n in enumerate(names))


def pair_template(template: str, names: Sequence[str]) -> Template:
    """The positional template of one comparison: fields ``0..m-1`` are candidate A's columns,
    ``m..2m-1`` candidate B's (``m = len(names)``)."""
    m = len(names)
    text = (
        f"Criterion: {_escape(criterion(template, names))}\n"
        f"A: {_item(names, 0)}\nB: {_item(names, m)}\n"
        "Does A fit the criterion better than B?"
    )
    return parse_template(text)


def window_template(template: str, names: Sequence[str], size: int) -> Template:
    """The positional template ranking ``size`` numbered candidates in one answer: candidate
    ``j`` (shown ``[j+1]``) is fields ``j*m..j*m+m-1``."""
    if size < 2:
        raise ValueError("a window ranks at least two candidates")
    m = len(names)
    listed = "\n".join(f"[{j + 1}] {_item(names, j * m)}" for j in range(size))
    text = (
        f"Rank the {size} items below by how well each fits this criterion: "
        f"{_escape(criterion(template, names))}\n{listed}\n"
        "Answer with the item numbers only, best first, in the form [2] > [1] > [3], "
        f"listing all {size}."
    )
    return parse_template(text)


def parse_permutation(text: str | None, size: int) -> tuple[tuple[int, ...], bool]:
    """The 0-based order a window answer gives, and whether it was a whole permutation.

    The numbers 1..``size`` are read in the order they appear (others ignored, repeats kept at
    their first place); candidates the answer leaves out follow in their window order, so any
    answer, even none, gives an order. ``False`` says the answer was not a full permutation
    (the caller counts it as a fallback).

    Example:
        >>> parse_permutation("3, 3, 9, 1", 4)
        ((2, 0, 1, 3), False)
    """
    seen: list[int] = []
    for match in _NUMBER.finditer(text or ""):
        n = int(match.group())
        if 1 <= n <= size and n - 1 not in seen:
            seen.append(n - 1)
    complete = len(seen) == size
    return tuple(seen + [j for j in range(size) if j not in seen]), complete
