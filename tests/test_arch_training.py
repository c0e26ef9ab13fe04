"""Issue 45's architectures train here: each tiny preset runs ``train.py``'s function in process,
through a data mode, validation and a checkpoint, and ends with finite weights. The full matrix
(20 steps on both data modes, Real-ESRGAN's degradations, bfloat16, ``train.init_from`` a
PyTorch file) is ``python -m benchmarks.arch_training``, whose output docs/performance.md
gives."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.arch_training import finite_checkpoint
from sr.config import ConfigError, validate
from sr.train.app import run

# each architecture on one data mode (the two modes alternate over the list); the transformers
# with one group of two blocks (a plain and a shifted one; DAT: a spatial and a channel one) and
# OmniSR with one group: each block adds seconds of tracing, and the fixtures' tests check the
# whole tiny presets against PyTorch
ONE_GROUP = ("model.depths=[2]", "model.heads=[2]")
CASES = [
    ("swinir", "tfrecord", ONE_GROUP),
    ("hat", "generator", ONE_GROUP),
    ("dat", "tfrecord", ONE_GROUP),
    ("omnisr", "generator", ("model.groups=1",)),
    ("rcan", "tfrecord", ()),
    ("safmn", "generator", ()),
    ("realplksr", "tfrecord", ()),
]


@pytest.mark.slow
@pytest.mark.parametrize("arch, mode, smaller", CASES, ids=[f"{a}-{m}" for a, m, _ in CASES])
def test_each_tiny_preset_trains_validates_and_saves_finite_weights(
    arch, mode, smaller, folders, compose, tmp_path
):
    cfg = compose(
        f"model={arch}_tiny",
        *smaller,
        f"data={mode}",
        f"data.hr_dir={folders / 'train'}",
        f"data.val_dir={folders / 'val'}",
        "data.batch_size=2",
        "data.patch_size=64",
        "train.steps=3",
        "train.ckpt_every=3",
        "train.log_every=3",
        "train.val_every=3",
        "seed=0",
    )
    result = run(cfg, tmp_path / "run")
    assert result["step"] == 3
    assert np.isfinite(result["val/psnr"])
    assert finite_checkpoint(tmp_path / "run") == (3, True)  # weights, averages, slots


@pytest.mark.parametrize("model", ["omnisr_tiny", "rlfn"])
def test_a_patch_smaller_than_the_attention_pool_takes_is_refused_before_any_work(model, compose):
    """RLFN's and OmniSR's ESA (a stride-2 3x3 conv, then a 7x7 max pool) needs 15 x 15 LR
    pixels: a 32-pixel HR patch (8 x 8 LR) was a Keras error in the first step's trace."""
    with pytest.raises(ConfigError, match=r"data.patch_size=32 gives 8 x 8 LR patches at x4, "
                       r"smaller than model (omnisr|rlfn) takes \(15 x 15 LR pixels\): use "
                       r"data.patch_size >= 60"):  # fmt: skip
        validate(compose(f"model={model}", "data.patch_size=32"))
    validate(compose(f"model={model}", "data.patch_size=60"))
