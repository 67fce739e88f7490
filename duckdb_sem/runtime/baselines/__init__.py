"""Baseline runtimes for benchmarks, selectable per query (``RuntimeOptions.mode``).

- ``static``: the SEU loop with one fixed plan (lives in :mod:`..seu_loop`);
- :mod:`.static_best`: every candidate run statically, the cheapest in hindsight kept;
- :mod:`.eddies`: per-tuple routing among commuting filters (Avnur and Hellerstein, 2000);
- :mod:`.lotus_like`: the written order, one operator at a time over the whole table.
"""
