"""The ``duckdb-sem`` command line (the only place that configures logging and renders progress)."""
