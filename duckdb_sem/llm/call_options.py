"""Per-call options of a semantic function: ``model :=``, ``temperature :=``, ``max_tokens :=``,
``choices :=``, ``examples :=``, ``batch_size :=``, ``method :=``.

Every ``sem_*`` function takes them as named arguments after its positional ones, in DuckDB's
``name := value`` form (``=>`` is read the same way); each value is a literal. They are parsed
here, in one place, for every entry: the binder, the plan builder, the table functions, the
relation API (which writes them) and the UDFs (which receive them from their macros).

- ``model``: a model registered on the connection (``connect(models=...)``,
  ``CREATE MODEL``); ``'default'`` is the connection's own backend.
- ``temperature`` (>= 0) and ``max_tokens`` (>= 1): decoding of generated answers
  (``sem_map``, ``sem_agg``, ``sem_extract``). A decision (``sem_filter``, ``sem_join``,
  ``sem_topk``) is read from the yes/no tokens' log-probabilities, which neither changes, so
  there they are an error rather than silently ignored.
- ``choices`` (``sem_map`` only): the closed answer set, scored rather than generated.
  ``choices := ['POSITIVE', 'NEGATIVE']`` forces it; ``choices := []`` refuses the one the
  template's words name (``llm.closed``), so the map is generated as free text.
- ``per_row`` (``sem_join`` only; with ``per_row_match``): the opt-in per-row rewrite of a pair
  template, one question asked of each row instead of each pair (:mod:`duckdb_sem.llm.pairs`).

- ``examples`` (all but ``sem_agg``): few-shot examples that replace the default ones for this
  call, ``examples := [{'input': 'Great fun', 'output': 'yes'}, ...]``; a decision's outputs
  are yes/no (or true/false), a map's the answer text. They go in the request's instruction
  (:func:`duckdb_sem.llm.prompts.build_request`).
- ``batch_size`` (>= 1): rows per SEU for this call instead of ``DUCKDB_SEM_BATCH_SIZE``; it
  cuts the work differently and never changes an answer, so it alone is not in the signature.
- ``method`` (``sem_topk`` only): ``'pointwise'`` (the default: one scored decision per row),
  ``'pairwise'`` (a tournament of comparisons) or ``'listwise'`` (windows of rows ranked in
  one answer); see :mod:`duckdb_sem.runtime.ranking`.

All but ``batch_size`` are part of every request's instruction or decoding parameters, hence of
its signature and cache key.

Example:
    ``sem_map('{title} in 3 words', model := 'big', temperature := 0.2, max_tokens := 16)``
    gives ``CallOptions(model='big', temperature=0.2, max_tokens=16)``.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass

from sqlglot import exp

from duckdb_sem.errors import BindError
from duckdb_sem.llm.call_examples import (
    EXAMPLES_FORM,
    check_decision_examples,
    check_examples,
    examples_option,
    yes_no,
)
from duckdb_sem.llm.request import DecodingParams

__all__ = [
    "DECISIONS",
    "DEFAULT_OPTIONS",
    "EXAMPLES_FORM",
    "OPTION_NAMES",
    "RANK_METHODS",
    "CallOptions",
    "choices_option",
    "examples_option",
    "is_option",
    "models_named",
    "split_options",
]

OPTION_NAMES = ("model", "temperature", "max_tokens", "choices", "per_row", "per_row_match",
                "examples", "batch_size", "method")  # fmt: skip

#: functions whose answer is a decision: only ``model`` applies to them
DECISIONS = frozenset({"sem_filter", "sem_join", "sem_topk"})

#: how ``sem_topk`` ranks (``method :=``); the first is the default
RANK_METHODS = ("pointwise", "pairwise", "listwise")


@dataclass(frozen=True, slots=True)
class CallOptions:
    """What one call asks beyond its template; None: the connection's default."""

    model: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    #: a map's closed answer set: None (read from the template's words), () (none: generate)
    choices: tuple[str, ...] | None = None
    per_row: str | None = None  # a one-field question asked of each side (sem_join only)
    per_row_match: str | None = None  # 'same' or 'different' (None: from the template)
    #: (input, output) pairs replacing the default few-shot examples (None: the defaults)
    examples: tuple[tuple[str, str], ...] | None = None
    batch_size: int | None = None  # rows per SEU (None: the connection's batch size)
    method: str | None = None  # sem_topk's ranking method (None: 'pointwise')

    def __post_init__(self) -> None:
        if self.model is not None and not self.model.strip():
            raise BindError("model := '' names no model; name one, or leave model out")
        if self.temperature is not None and not (
            math.isfinite(self.temperature) and self.temperature >= 0
        ):
            raise BindError(
                f"temperature := {self.temperature} must be a number >= 0 (0 is greedy)"
            )
        if self.max_tokens is not None and self.max_tokens < 1:
            raise BindError(f"max_tokens := {self.max_tokens} must be a whole number >= 1")
        if self.choices:
            if any(not isinstance(c, str) or not c.strip() for c in self.choices):
                raise BindError(
                    f"choices := {list(self.choices)!r}: every choice must be a non-empty "
                    "string, e.g. choices := ['POSITIVE', 'NEGATIVE']"
                )
            if len(set(self.choices)) < 2:
                raise BindError(
                    f"choices := {list(self.choices)!r} needs at least two distinct choices "
                    "(or choices := [] to generate free text)"
                )
        if self.per_row is not None and not self.per_row.strip():
            raise BindError("per_row := '' asks nothing; give the question each row answers")
        if self.per_row_match not in (None, "same", "different"):
            raise BindError(f"per_row_match := {self.per_row_match!r}: use 'same' or 'different'")
        if self.examples is not None:
            check_examples(self.examples)
        if self.batch_size is not None and self.batch_size < 1:
            raise BindError(f"batch_size := {self.batch_size} must be a whole number >= 1")
        if self.method is not None and self.method not in RANK_METHODS:
            raise BindError(
                f"method := {self.method!r} is not a ranking method; use one of "
                + ", ".join(repr(m) for m in RANK_METHODS)
            )

    @property
    def model_name(self) -> str | None:
        """The model's registry key (names are case-insensitive, like SQL identifiers)."""
        return None if self.model is None else self.model.strip().lower()

    @property
    def is_default(self) -> bool:
        return (
            self.model is None
            and self.temperature is None
            and self.max_tokens is None
            and self.choices is None
            and (self.per_row is None and self.per_row_match is None)
            and self.examples is None
            and self.batch_size is None
            and self.method is None
        )

    def check_for(self, function: str) -> None:
        """Raise :class:`BindError` when decoding options are given to a decision."""
        if function.lower() in DECISIONS and (
            self.temperature is not None or self.max_tokens is not None
        ):
            given = [n for n in ("temperature", "max_tokens") if getattr(self, n) is not None]
            raise BindError(
                f"{function}: {' and '.join(given)} do not apply to a yes/no decision (it is "
                "read from the answer tokens' log-probabilities); pass only model := here, "
                "or use them on sem_map / sem_agg"
            )
        if self.choices is not None and not function.lower().startswith("sem_map"):
            raise BindError(
                f"{function}: choices := applies to sem_map only (a closed answer set scored "
                "instead of generated); sem_classify takes its labels as its second argument"
            )
        if function.lower() != "sem_join" and (
            self.per_row is not None or self.per_row_match is not None
        ):
            raise BindError(
                f"{function}: per_row := rewrites a pair decision and applies only to sem_join "
                "(e.g. sem_join('{r1.text} and {r2.text} agree', per_row := 'Is this review "
                "positive? {text}'))"
            )
        if self.per_row_match is not None and self.per_row is None:
            raise BindError(f"{function}: per_row_match := needs per_row := (the question)")
        if self.examples is not None and function.lower().startswith("sem_agg"):
            raise BindError(
                f"{function}: examples := applies to row functions (sem_filter, sem_join, "
                "sem_map, ...), not to an aggregate"
            )
        if self.examples is not None and self.per_row is not None:
            raise BindError(
                f"{function}: examples := are answers to the pair question, which per_row := "
                "replaces with a per-row one; give one of the two"
            )
        if self.examples is not None and function.lower() in DECISIONS:
            check_decision_examples(function, self.examples)
        if self.method is not None and function.lower() != "sem_topk":
            raise BindError(
                f"{function}: method := chooses how sem_topk ranks rows and applies only to it "
                "(e.g. sem_topk('reviews', 3, '{text} is enthusiastic', method := 'pairwise'))"
            )

    def example_pairs(self, *, decision: bool) -> tuple[tuple[str, str], ...]:
        """The examples, a decision's outputs written yes/no (``true`` -> ``yes``)."""
        if not decision:
            return self.examples or ()
        return yes_no(self.examples or ())

    def decoding(self, params: DecodingParams) -> DecodingParams:
        """``params`` with this call's temperature and max_tokens where given."""
        return DecodingParams(
            max_tokens=params.max_tokens if self.max_tokens is None else self.max_tokens,
            temperature=params.temperature if self.temperature is None else self.temperature,
            seed=params.seed,
        )

    def without_rewrite(self) -> CallOptions:
        """These options for the per-row question itself (the model, no rewrite; the pair's
        examples do not fit it)."""
        return CallOptions(self.model, self.temperature, self.max_tokens,
                           batch_size=self.batch_size)  # fmt: skip

    def key(self) -> list[object]:
        """The options as plain values (for operator signatures): not ``batch_size``, which
        never changes an answer."""
        choices = None if self.choices is None else list(self.choices)
        rewrite = [self.per_row, self.per_row_match] if self.per_row is not None else []
        examples = [] if self.examples is None else [[list(p) for p in self.examples]]
        method = [] if self.method is None else [["method", self.method]]
        return [self.model_name, self.temperature, self.max_tokens, choices, *rewrite, *examples,
                *method]  # fmt: skip

    def sql_args(self) -> str:
        """The named arguments as SQL, each after ``, `` (empty when all are default)."""
        out = ""
        if self.model is not None:
            out += ", model := " + exp.Literal.string(self.model).sql(dialect="duckdb")
        if self.temperature is not None:
            out += f", temperature := {self.temperature!r}"
        if self.max_tokens is not None:
            out += f", max_tokens := {self.max_tokens}"
        if self.choices is not None:
            listed = ", ".join(exp.Literal.string(c).sql(dialect="duckdb") for c in self.choices)
            out += f", choices := [{listed}]"
        for name in ("per_row", "per_row_match"):
            value = getattr(self, name)
            if value is not None:
                out += f", {name} := " + exp.Literal.string(value).sql(dialect="duckdb")
        if self.examples is not None:
            out += ", examples := [" + ", ".join(
                "{'input': " + exp.Literal.string(given).sql(dialect="duckdb")
                + ", 'output': " + exp.Literal.string(output).sql(dialect="duckdb") + "}"
                for given, output in self.examples
            ) + "]"  # fmt: skip
        if self.batch_size is not None:
            out += f", batch_size := {self.batch_size}"
        if self.method is not None:
            out += f", method := '{self.method}'"
        return out


DEFAULT_OPTIONS = CallOptions()


def is_option(node: exp.Expression) -> bool:
    """A ``name := value`` (or ``name => value``) argument."""
    return isinstance(node, exp.PropertyEQ | exp.Kwarg)


def models_named(tree: exp.Expr) -> list[str]:
    """The models the ``sem_*`` calls of ``tree`` name with ``model :=`` (their options are
    checked on the way, so a bad one fails before anything runs)."""
    names: list[str] = []
    for call in tree.find_all(exp.Anonymous):
        if call.name.lower().startswith("sem_"):
            model = split_options(call)[2].model
            if model is not None and model not in names:
                names.append(model)
    return names


def split_options(call: exp.Func) -> tuple[list[exp.Expression], list[exp.Expression], CallOptions]:
    """``call``'s positional arguments, its named-argument nodes, and the options they give.

    Named arguments come last; each is one of :data:`OPTION_NAMES`, given once, with a literal
    value. Anything else is a :class:`BindError` naming the argument and how to write it.
    """
    function = call.name.lower()
    positional: list[exp.Expression] = []
    named: list[exp.Expression] = []
    values: dict[str, object] = {}
    for arg in call.expressions:
        if not is_option(arg):
            if named:
                raise BindError(
                    f"{function}: positional argument {arg.sql(dialect='duckdb')} after a named "
                    "one; put model := / temperature := / max_tokens := last"
                )
            positional.append(arg)
            continue
        name = arg.this.name.lower() if isinstance(arg.this, exp.Expression) else str(arg.this)
        if name not in OPTION_NAMES:
            close = difflib.get_close_matches(name, OPTION_NAMES, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]}?" if close else ""
            raise BindError(
                f"{function}: unknown named argument {name!r}{hint} Valid: "
                + ", ".join(OPTION_NAMES)
            )
        if name in values:
            raise BindError(f"{function}: {name} := is given twice; give it once")
        values[name] = _literal(function, name, arg.expression)
        named.append(arg)
    options = CallOptions(
        model=_typed(function, "model", values.get("model"), str),
        temperature=_number(function, values.get("temperature")),
        max_tokens=_whole(function, values.get("max_tokens")),
        choices=choices_option(function, values.get("choices")),
        per_row=_typed(function, "per_row", values.get("per_row"), str),
        per_row_match=_typed(function, "per_row_match", values.get("per_row_match"), str),
        examples=examples_option(function, values.get("examples")),
        batch_size=_whole(function, values.get("batch_size"), name="batch_size"),
        method=_method(function, values.get("method")),
    )
    options.check_for(function)
    return positional, named, options


def _literal(function: str, name: str, node: exp.Expression) -> object:
    """A literal's value: a string, a number (as text), None for NULL, or a tuple of values
    for a list of literals (``['a', 'b']``)."""
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Boolean):
        return "true" if node.this else "false"
    if isinstance(node, exp.Struct):  # {'input': ..., 'output': ...}
        fields: dict[str, object] = {}
        for item in node.expressions:
            if not isinstance(item, exp.PropertyEQ | exp.Slice):
                raise BindError(f"{function}: {name} := ...: write {EXAMPLES_FORM}")
            fields[item.this.name.lower()] = _literal(function, name, item.expression)
        return fields
    if isinstance(node, exp.Array):
        return tuple(_literal(function, name, item) for item in node.expressions)
    if isinstance(node, exp.Literal):
        return node.this if node.is_string else float(node.this)
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        return -float(node.this.this)
    raise BindError(
        f"{function}: {name} := must be a literal value, got {node.sql(dialect='duckdb')} "
        f"(e.g. {name} := {_EXAMPLES[name]})"
    )


_EXAMPLES = {
    "model": "'fast'",
    "temperature": "0.2",
    "max_tokens": "64",
    "choices": "['POSITIVE', 'NEGATIVE']",
    "per_row": "'Is this review positive? {text}'",
    "per_row_match": "'same'",
    "examples": "[{'input': 'Great fun', 'output': 'yes'}]",
    "batch_size": "16",
    "method": "'pairwise'",
}


def choices_option(function: str, value: object) -> tuple[str, ...] | None:
    """``choices :=`` as given (a tuple or list of values, or None), checked to be strings."""
    if isinstance(value, list):
        value = tuple(value)
    if value is None:
        return None
    if not isinstance(value, tuple) or not all(isinstance(v, str) for v in value):
        raise BindError(
            f"{function}: choices := takes a list of strings, e.g. choices := "
            f"{_EXAMPLES['choices']} (or [] to generate free text)"
        )
    return tuple(str(v) for v in value)


def _typed(function: str, name: str, value: object, kind: type) -> str | None:
    if value is None:
        return None
    if not isinstance(value, kind):
        raise BindError(f"{function}: {name} := takes a string, e.g. {name} := {_EXAMPLES[name]}")
    return str(value)


def _method(function: str, value: object) -> str | None:
    method = _typed(function, "method", value, str)
    return None if method is None else method.strip().lower()


def _number(function: str, value: object) -> float | None:
    if value is None:
        return None
    if not isinstance(value, float):
        raise BindError(f"{function}: temperature := takes a number, e.g. temperature := 0.2")
    return value


def _whole(function: str, value: object, *, name: str = "max_tokens") -> int | None:
    if value is None:
        return None
    if not isinstance(value, float) or not value.is_integer():
        raise BindError(
            f"{function}: {name} := takes a whole number, e.g. {name} := {_EXAMPLES[name]}"
        )
    return int(value)
