"""duckdb-sem: semantic SQL for DuckDB."""
