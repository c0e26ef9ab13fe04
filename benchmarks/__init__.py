"""Benchmark baselines and measurements (not product code): the reference pipelines of
``../shared/references`` ported to TF2, draw statistics, and helpers of ``scripts/bench_data.py``
and ``scripts/shuffle_report.py``."""
