"""Benchmark workloads: datasets installed from packages (``install.py``), the query set
(``queries.py``) and the label oracle of the SIMULATED backend (``oracle.py``)."""
