"""The label choice both peers' classifiers share: Snowflake's ``AI_CLASSIFY`` and BigQuery's
``AI.CLASSIFY``, single- or multi-label, labels with or without descriptions.

Single-label is one ``sem_classify`` (one scored choice among the labels); multi-label is one
scored yes/no decision per label (``sem_map(..., 'BOOLEAN')``), flattened into the list of those
that apply, in the order the labels were given.

Example:
    ``AI.CLASSIFY(text, ['a', 'b'])`` becomes
    ``sem_classify('Classify into one of: a; b.\\nText: {0}', ['a', 'b'], text)``
"""

from __future__ import annotations

from sqlglot import exp

from duckdb_sem.surface.peer_args import (
    PeerCall,
    Prompt,
    key_values,
    literal,
    peer_error,
    string_of,
)

__all__ = ["classified", "labels_of"]


def classified(
    call: PeerCall,
    input_node: exp.Expression | None,
    categories: exp.Expression | None,
    task: str | None,
    mode: str,
    usage: str,
    *,
    scalar: bool = False,
) -> str:
    """The SQL of the chosen label(s): one scored choice among the labels (single), or one
    scored yes/no decision per label (multi), a list of those that apply."""
    ours = "sem_classify('{text} kind', ['a', 'b'])"
    if input_node is None:
        raise peer_error(call.peer, "no input given", usage, ours)
    labels = labels_of(call, categories, usage, ours)
    described = [f"{name}: {text}" if text else name for name, text in labels]
    prompt = Prompt.of(input_node, call.peer, usage, ours)
    lead = f"{task}\n" if task else ""
    if mode.lower() == "single":
        asked = prompt.prefixed(f"{lead}Classify into one of: {'; '.join(described)}.\nText: ")
        chosen = asked.call("sem_classify", "[" + ", ".join(literal(n) for n, _ in labels) + "]")
        return chosen if scalar else f"[{chosen}]"
    if mode.lower() != "multi":
        raise peer_error(
            call.peer, f"output_mode is 'single' or 'multi', got {mode!r}", usage, ours
        )
    decisions = []
    for (name, _), text in zip(labels, described, strict=True):
        asked = prompt.prefixed(f"{lead}Does the category '{text}' apply to this text? ")
        yes = asked.call("sem_map", output="BOOLEAN")
        decisions.append(f"CASE WHEN {yes} THEN [{literal(name)}] ELSE []::VARCHAR[] END")
    return f"flatten([{', '.join(decisions)}])"


def labels_of(
    call: PeerCall, node: exp.Expression | None, usage: str, ours: str
) -> list[tuple[str, str | None]]:
    """(label, description) per category: strings, {'label', 'description'} objects (Snowflake)
    or ('label', 'description') tuples (BigQuery)."""
    if not isinstance(node, exp.Array) or len(node.expressions) < 2:
        raise peer_error(call.peer, "the categories must be a list of at least two labels",
                         usage, ours)  # fmt: skip
    out: list[tuple[str, str | None]] = []
    for item in node.expressions:
        entry = key_values(item)
        parts = item.expressions if isinstance(item, exp.Tuple) else []
        if string_of(item) is not None:
            out.append((str(string_of(item)), None))
        elif entry is not None and string_of(entry.get("label")) is not None:
            out.append((str(string_of(entry["label"])), string_of(entry.get("description"))))
        elif len(parts) == 2 and all(string_of(p) is not None for p in parts):
            out.append((str(string_of(parts[0])), string_of(parts[1])))
        else:
            raise peer_error(call.peer, f"category {item.sql(dialect='duckdb')} is not a string "
                             "literal or a label with a description", usage, ours)  # fmt: skip
    if len({n for n, _ in out}) != len(out):
        raise peer_error(call.peer, "the categories repeat a label", usage, ours)
    return out
