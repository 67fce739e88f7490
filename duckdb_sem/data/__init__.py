"""Small real labelled datasets bundled with the package, for demos, tests and benchmarks.

They are package data (not downloaded at run time) so tests stay offline and reproducible; see
``README.md`` in this folder for provenance and how to regenerate them.

Example:
    >>> import duckdb
    >>> duckdb.sql(f"SELECT count(*) FROM '{dataset_path('rt_reviews.csv')}'").fetchall()
    [(300,)]
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

from duckdb_sem.errors import ConfigError

__all__ = ["DATASETS", "DEMO_TABLES", "dataset_path", "demo_path"]

#: the bundled files; anything else is a typo that should fail loudly, not read an empty table
DATASETS = ("rt_reviews.csv", "rt_plots.csv")
#: the demo's stable table names (what the README and docs/ query) -> their bundled files
DEMO_TABLES = {"reviews": "rt_reviews.csv", "plots": "rt_plots.csv"}


def dataset_path(name: str) -> Path:
    """The filesystem path of a bundled dataset, e.g. ``dataset_path("rt_reviews.csv")``.

    A real path (not a resource stream) because DuckDB reads files by name.
    """
    if name not in DATASETS:
        raise FileNotFoundError(f"no bundled dataset {name!r}; choose one of {', '.join(DATASETS)}")
    path = Path(str(importlib.resources.files("duckdb_sem.data").joinpath(name)))
    if not path.is_file():
        raise FileNotFoundError(
            f"bundled dataset {name!r} is missing at {path}; "
            "regenerate it with `python scripts/make_datasets.py`"
        )
    return path


def demo_path(table: str = "reviews") -> Path:
    """The bundled CSV behind the demo table ``reviews`` or ``plots``, by its stable name.

    The file names are an implementation detail of the package; the docs name the tables.
    """
    if table not in DEMO_TABLES:
        raise ConfigError(f"no demo table {table!r}; choose one of {', '.join(DEMO_TABLES)}")
    return dataset_path(DEMO_TABLES[table])
