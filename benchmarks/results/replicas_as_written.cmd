python benchmarks/bench_replicas.py --workloads as-written --queries 40 --loads 0.5 1.0 1.5 --real-queries 0 --out replicas_as_written
