"""OmniSR beside the official PyTorch class on this CPU: ``benchmarks/arch_dat.py`` with
``--arch omnisr`` (parameters, max |Keras - PyTorch| on the fixtures, a training step timed
side by side).

    python -m benchmarks.arch_omnisr [--presets omnisr_tiny,omnisr] [--batch 2] [--patch 32]
"""

from __future__ import annotations

import sys

from benchmarks.arch_dat import main

if __name__ == "__main__":
    raise SystemExit(main(["--arch", "omnisr", *sys.argv[1:]]))
