python benchmarks/bench_replicas.py --real-only --real-queries 8 --out replicas
