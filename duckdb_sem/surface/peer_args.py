"""Reading a peer system's call arguments: prompts, label lists, option objects, model names.

The peers pass a prompt as a whole string (Snowflake), as Snowflake's ``PROMPT('..{0}..', col)``,
as BigQuery's tuple of parts ``('Is ', col, ' spam?')`` or as Flock's
``{'prompt': '...', 'context_columns': [{'data': col}]}``. Each becomes one :class:`Prompt`: a
positional duckdb-sem template and the SQL of its arguments, so
``sem_filter('Is {0} spam?', body)`` is written the same way whichever peer it came from (and the
cache, keyed by the rendered prompt, does not care which). A part that is text is escaped (a
peer's ``{`` is a brace, not a field).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from sqlglot import exp

from duckdb_sem.errors import BindError
from duckdb_sem.llm.template import parse_template

__all__ = [
    "Models",
    "PeerCall",
    "Prompt",
    "Rewrite",
    "decoding",
    "key_values",
    "literal",
    "model_option",
    "peer_error",
    "string_of",
]

#: the connection's model names (None: every peer model name means the default model)
Models = Collection[str] | None


def literal(text: str) -> str:
    """``text`` as an SQL string literal."""
    return exp.Literal.string(text).sql(dialect="duckdb")


def peer_error(peer: str, wrong: str, usage: str, ours: str) -> BindError:
    """The one shape of a wrong-arguments error: the peer, what was wrong, what it expects and
    the duckdb-sem call that does the same."""
    return BindError(f"{peer}: {wrong}; write {usage} (in duckdb-sem: {ours})")


@dataclass(frozen=True, slots=True)
class PeerCall:
    """One peer call as parsed: its positional and named arguments (names in lower case)."""

    peer: str  # as the peer spells it: AI_FILTER, AI.IF, llm_filter
    args: tuple[exp.Expression, ...]
    named: tuple[tuple[str, exp.Expression], ...] = ()

    def get(self, name: str, position: int | None = None) -> exp.Expression | None:
        """Argument ``name`` (given by name), else the one at ``position`` (None: absent)."""
        for key, value in self.named:
            if key == name:
                return value
        if position is not None and position < len(self.args):
            return self.args[position]
        return None

    def check_shape(self, most: int, usage: str, ours: str, *, named: Collection[str] = ()) -> None:
        """Refuse more than ``most`` positional arguments, or a named one not in ``named``: an
        argument the rewrite would not read must not be dropped silently."""
        if len(self.args) > most:
            raise peer_error(self.peer, f"takes at most {most} argument(s), got {len(self.args)}",
                             usage, ours)  # fmt: skip
        self.check_named(named, usage, ours)

    def check_named(self, allowed: Collection[str], usage: str, ours: str) -> None:
        for key, _ in self.named:
            if key not in allowed:
                known = ", ".join(sorted(allowed)) or "none"
                raise peer_error(self.peer, f"unknown named argument {key!r} (known: {known})",
                                 usage, ours)  # fmt: skip


#: one peer call's rewrite: duckdb-sem SQL, or None when the arguments are already ours
Rewrite = Callable[[PeerCall, Models], str | None]


@dataclass(frozen=True, slots=True)
class Prompt:
    """A positional duckdb-sem template and the SQL of the value for each ``{i}``."""

    template: str
    args: tuple[str, ...] = ()

    def prefixed(self, text: str) -> Prompt:
        """``text`` (plain words, escaped) before this prompt."""
        return Prompt(_escape(text) + self.template, self.args)

    def suffixed(self, text: str) -> Prompt:
        return Prompt(self.template + _escape(text), self.args)

    def call(
        self, function: str, *lead: str, output: str | None = None, options: Sequence[str] = ()
    ) -> str:
        """``function('template', *lead, args..., 'output type', options...)`` as SQL.

        A prompt without values (``AI_COMPLETE('m', 'What are LLMs?')``) is passed as the one
        value of ``'{0}'``: a duckdb-sem template must name a value."""
        if not self.args:
            text = self.template.replace("{{", "{").replace("}}", "}")
            return Prompt("{0}", (exp.Literal.string(text).sql(dialect="duckdb"),)).call(
                function, *lead, output=output, options=options
            )
        typed = [] if output is None else [exp.Literal.string(output).sql(dialect="duckdb")]
        parts = [exp.Literal.string(self.template).sql(dialect="duckdb"), *lead, *self.args,
                 *typed, *options]  # fmt: skip
        return f"{function}({', '.join(parts)})"

    @staticmethod
    def of(node: exp.Expression, peer: str, usage: str, ours: str) -> Prompt:
        """Any peer prompt form (see the module docstring); a bare expression is one value."""
        if isinstance(node, exp.Anonymous) and node.name.lower() == "prompt":
            return _prompt_call(node, peer, usage, ours)
        if isinstance(node, exp.Tuple | exp.Paren):
            parts = node.expressions if isinstance(node, exp.Tuple) else [node.this]
            return Prompt.concat(parts)
        if isinstance(node, exp.Literal) and node.is_string:
            return Prompt(_escape(node.this))
        return Prompt("{0}", (node.sql(dialect="duckdb"),))

    @staticmethod
    def concat(parts: Sequence[exp.Expression]) -> Prompt:
        """BigQuery's tuple: text parts stay text, every other part is one value."""
        template: list[str] = []
        args: list[str] = []
        for part in parts:
            if isinstance(part, exp.Literal) and part.is_string:
                template.append(_escape(part.this))
            else:
                template.append(f"{{{len(args)}}}")
                args.append(part.sql(dialect="duckdb"))
        return Prompt("".join(template), tuple(args))

    @staticmethod
    def with_context(text: str, context: Sequence[tuple[str | None, str]]) -> Prompt:
        """Flock's prompt: the instruction, then each context column (named when it has a
        name), as Flock serialises them after the prompt."""
        lines = [_escape(text)]
        for i, (name, _) in enumerate(context):
            lines.append(f"{_escape(name)}: {{{i}}}" if name else f"{{{i}}}")
        return Prompt("\n".join(lines), tuple(sql for _, sql in context))


def _prompt_call(node: exp.Anonymous, peer: str, usage: str, ours: str) -> Prompt:
    """Snowflake's ``PROMPT('template with {0}', a, ...)``: its ``{i}`` are ours already."""
    args = list(node.expressions)
    if not args or not (isinstance(args[0], exp.Literal) and args[0].is_string):
        raise peer_error(peer, "PROMPT() needs a string template first",
                         "PROMPT('Is {0} spam?', body)", ours)  # fmt: skip
    template = parse_template(args[0].this)
    if not template.is_positional and template.distinct_fields():
        raise peer_error(peer, f"PROMPT() numbers its fields ({{0}}, {{1}}), got {args[0].this!r}",
                         "PROMPT('Compare {0} with {1}', a, b)", ours)  # fmt: skip
    used = {int(f) for f in template.distinct_fields()} if template.is_positional else set()
    if used and max(used) >= len(args) - 1:
        raise peer_error(peer, f"PROMPT() uses {{{max(used)}}} but has {len(args) - 1} value(s)",
                         usage, ours)  # fmt: skip
    return Prompt(args[0].this, tuple(a.sql(dialect="duckdb") for a in args[1:]))


def string_of(node: exp.Expression | None) -> str | None:
    """The value of a string literal; None for anything else."""
    if isinstance(node, exp.Literal) and node.is_string:
        return str(node.this)
    return None


def key_values(node: exp.Expression | None) -> dict[str, exp.Expression] | None:
    """The entries of a ``{'key': value, ...}`` object literal (keys in lower case); None when
    ``node`` is not one."""
    if not isinstance(node, exp.Struct):
        return None
    out: dict[str, exp.Expression] = {}
    for entry in node.expressions:
        if isinstance(entry, exp.PropertyEQ | exp.Slice | exp.Kwarg):
            key = entry.this
            name = key.this if isinstance(key, exp.Literal) else key.name
            out[str(name).lower()] = entry.expression
    return out


def model_option(name: str | None, models: Collection[str] | None) -> list[str]:
    """The ``model :=`` for a peer's model name: that model when the connection has one by
    that name (``CREATE MODEL``, ``connect(models=...)``), else none (the connection's own
    backend); a peer's catalogue name (``llama3.1-8b``, ``gpt-4o``) means nothing here."""
    if name is None or models is None:
        return []
    key = name.strip().lower()
    if key in models and key != "default":
        return [f"model := {exp.Literal.string(key).sql(dialect='duckdb')}"]
    return []


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def decoding(
    call: PeerCall, params: dict[str, exp.Expression] | None, usage: str, ours: str
) -> list[str]:
    """``temperature :=`` / ``max_tokens :=`` from a peer's model parameters (others refused)."""
    out = []
    for key, value in (params or {}).items():
        if key not in ("temperature", "max_tokens"):
            raise peer_error(call.peer, f"model parameter {key!r} is not supported (temperature "
                             "and max_tokens are)", usage, ours)  # fmt: skip
        out.append(f"{key} := {value.sql(dialect='duckdb')}")
    return out
