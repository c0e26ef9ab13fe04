"""Benchmark baselines and measurements (not product code): the reference pipelines of
``../shared/references`` ported to TF2, draw statistics, and helpers of ``scripts/bench_data.py``
and ``benchmarks/shuffle_report.py``. Part of the installed package so that the scripts import it
from any working directory."""
