"""Benchmark baselines and measurements (not product code): the reference pipelines of
``../shared/references`` ported to TF2 (``references``, ``sequences``), draw statistics
(``measures``), image folders (``folders``), and the logic of ``scripts/bench_data.py``: its
pipelines (``pipeline_runs``, ``sequence_runs``), their timing (``timing``) and its reports
(``pipeline_report``); used by ``benchmarks/`` too. Part of the installed package so that the
scripts import it from any working directory."""
