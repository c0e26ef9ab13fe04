"""The live comparison with PyTorch, both directions (needs torch, torchvision, spandrel and
BasicSR; skipped without them, as in CI): tests/fixtures/pytorch/live_rrdbnet.py, in a process
of its own (torchvision crashes when imported after TensorFlow). BasicSR's RRDBNet saved as a
.pth under params_ema is read here with its outputs; a run of ours written by export.py
--format safetensors is loaded by BasicSR's class with strict=True and by spandrel's
ModelLoader, and gives our outputs."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

TOLERANCE = 1e-4  # max |Keras - PyTorch|, float32, input in [0, 1]
NEEDS = ("torch", "torchvision", "spandrel", "basicsr")


@pytest.mark.torch
@pytest.mark.slow
def test_rrdbnet_both_directions(tmp_path):
    missing = [name for name in NEEDS if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(
            f"needs {', '.join(missing)} (pip install torch torchvision spandrel basicsr-fixed)"
        )
    script = ROOT / "tests" / "fixtures" / "pytorch" / "live_rrdbnet.py"
    proc = subprocess.run([sys.executable, str(script), str(tmp_path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["wrapper"] == "params_ema"
    assert result["spandrel_arch"] == "ESRGAN" and result["spandrel_scale"] == 4
    for key in ("basicsr_pth_to_keras", "keras_to_basicsr_strict", "keras_to_spandrel"):
        assert result[key] < TOLERANCE, result
