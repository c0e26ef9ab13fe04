"""RealPLKSR beside its official PyTorch class (issue 45): benchmarks/arch_rcan.py on the
realplksr_tiny and realplksr presets (parameters, mult-adds, ms per 256x256, fixtures' max diff and
export dB, training step ratio).

    python -m benchmarks.arch_realplksr [the options of benchmarks.arch_rcan]
"""

from __future__ import annotations

from benchmarks.arch_rcan import main

if __name__ == "__main__":
    raise SystemExit(main(presets=["realplksr_tiny", "realplksr"]))
