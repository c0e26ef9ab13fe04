"""Test oracles: independent reimplementations that the package is checked against, imported as
modules by the tests (``from tests.oracles import realesrgan``) and by the studies that time one
against the package (``python -m benchmarks.realesrgan_reference``); never imported by ``sr``,
``train.py`` or ``scripts/``."""
