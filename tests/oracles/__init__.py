"""Test oracles: independent reimplementations that the package is checked against, imported as
modules by the tests (``from tests.oracles import realesrgan``) and, where a benchmark times one
against the package, passed in by the benchmark script (``scripts/bench_data.py --degradation``);
never imported by ``sr``."""
