"""The base of plan nodes: ``Node`` and the unary and binary shapes every operator takes.

A node knows the attributes it ``reads`` and the new attributes it ``produces``; ``attrs`` is
the schema of its output (its children's attributes plus what it produces). ``with_children``
rebuilds a node over other children, re-running its constructor checks, so the optimizer's
rewrites cannot build an ill-formed plan.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

from duckdb_sem.errors import PlanError

__all__ = ["Binary", "Node", "Unary"]


@dataclass(frozen=True)
class Node:
    """Base of every plan node."""

    row_wise: ClassVar[bool] = False
    semantic: ClassVar[bool] = False

    @property
    def children(self) -> tuple[Node, ...]:
        return ()

    @property
    def reads(self) -> frozenset[str]:
        return frozenset()

    @property
    def produces(self) -> frozenset[str]:
        return frozenset()

    @cached_property
    def attrs(self) -> frozenset[str]:
        out: frozenset[str] = frozenset().union(*(c.attrs for c in self.children))
        return out | self.produces

    def with_children(self, *children: Node) -> Node:
        raise PlanError(f"{type(self).__name__} has no children")

    def label(self) -> str:
        return type(self).__name__

    def walk(self) -> Iterator[Node]:
        """Pre-order traversal."""
        yield self
        for child in self.children:
            yield from child.walk()

    def transform(self, step: Callable[[Node], Node]) -> Node:
        """Bottom-up rewrite: ``step`` sees each node after its children were rewritten."""
        kids = tuple(c.transform(step) for c in self.children)
        node = self.with_children(*kids) if kids != self.children else self
        return step(node)

    def _check_reads(self) -> None:
        missing = self.reads - frozenset().union(*(c.attrs for c in self.children))
        if missing:
            raise PlanError(
                f"{type(self).__name__} reads {sorted(missing)}, which its input does not have"
            )


@dataclass(frozen=True)
class Unary(Node):
    child: Node

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.child,)

    def with_children(self, *children: Node) -> Node:
        (child,) = children
        return dataclasses.replace(self, child=child)


@dataclass(frozen=True)
class Binary(Node):
    left: Node
    right: Node

    @property
    def children(self) -> tuple[Node, ...]:
        return (self.left, self.right)

    def with_children(self, *children: Node) -> Node:
        left, right = children
        return dataclasses.replace(self, left=left, right=right)

    def _check_sides(self) -> None:
        if self.left.attrs & self.right.attrs:
            raise PlanError(
                f"join sides share attributes {sorted(self.left.attrs & self.right.attrs)}"
            )
        self._check_reads()
