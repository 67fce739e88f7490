"""Logical plans: immutable nodes, built from sqlglot ASTs."""

from duckdb_sem.plan.logical import LogicalPlan
from duckdb_sem.plan.nodes import (
    Aggregate,
    Filter,
    Join,
    Limit,
    Node,
    Predicate,
    Project,
    ProjectItem,
    Scan,
    SemAgg,
    SemCall,
    SemFilter,
    SemJoin,
    SemMap,
    Sort,
    quote,
)

__all__ = [
    "Aggregate",
    "Filter",
    "Join",
    "Limit",
    "LogicalPlan",
    "Node",
    "Predicate",
    "Project",
    "ProjectItem",
    "Scan",
    "SemAgg",
    "SemCall",
    "SemFilter",
    "SemJoin",
    "SemMap",
    "Sort",
    "quote",
]
