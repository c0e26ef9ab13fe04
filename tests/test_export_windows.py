"""A TFLite export's windows against whole-image Keras, with trained weights (issue 46): an image
side shorter than the window was mirrored to it, which a trained RRDBNet turns into wrong rows at
the border (25.6 dB here; random weights hide it); it now runs at its own length. Sizes below,
above and between windows, none a multiple of one. The export's check runs its windows on an
image larger than one, and names the --overlap that reaches 45 dB when they miss it; int8 is
calibrated on scikit-image's photos without --calibration.

The weights (tests/fixtures/pytorch/rrdbnet_trained.safetensors, 220 kB): RRDBNet x4 RGB, 16
features, 1 block, growth 8, trained 400 steps of L1 on Real-ESRGAN's degradation::

    python train.py experiment=cpu20_realesrnet model.blocks=1 model.features=16 \\
        model.growth=8 train.steps=400 train.precision=float32 train.lr=2e-4 data=generator \\
        data.batch_size=4 data.patch_size=64 hydra.run.dir=RUN
    python scripts/export.py RUN OUT --format safetensors --weights live
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sr.cli import check_export_request
from sr.deploy import ExportCheckError, Exported, export_model, psnr_float
from tests.conftest import photo

pytest.importorskip("ai_edge_litert")

TRAINED = Path(__file__).resolve().parent / "fixtures" / "pytorch" / "rrdbnet_trained.safetensors"
SIZE = 48  # the window: the receptive field's overlap, 21, fits (48 > 2 x 21)


@pytest.fixture(scope="module")
def trained():
    from sr.models.state_dicts import load_file

    return load_file(TRAINED, kind="generator").model


@pytest.fixture(scope="module")
def exported(trained, tmp_path_factory):
    out = tmp_path_factory.mktemp("tfl") / "export"
    record = export_model(trained, out, "tflite", 4, size=SIZE)
    assert record["overlap"] == record["receptive_overlap"] == 21
    assert record["check"]["image"] == "[1, 54, 54, 3]" and record["check"]["psnr_db"] > 45
    return Exported(out)


def lr(h: int, w: int) -> np.ndarray:
    return (photo("astronaut")[::4, ::4][:h, :w] / 255.0).astype(np.float32)[np.newaxis]


@pytest.mark.slow
@pytest.mark.parametrize("h, w", [(37, 29), (37, 70), (101, 53), (23, 131)])
def test_windows_agree_with_keras_at_every_border(trained, exported, h, w):
    """Smaller than a window on both sides, on one, larger on both (3 x 2 windows), a long thin
    strip: >= 45 dB against Keras on the whole image, and the last rows and columns too."""
    x = lr(h, w)
    want, got = trained(x, training=False).numpy(), exported.run(x)
    assert psnr_float(got, want) > 45
    for edge in (got[:, -8:] - want[:, -8:], got[:, :, -8:] - want[:, :, -8:]):
        assert np.abs(edge).max() < 2 / 255


def test_mirroring_the_short_side_was_wrong_with_these_weights(trained):
    """The old path (mirror 37 rows to the window's 48, crop): what the test above would catch."""
    x = lr(37, SIZE)
    mirrored = np.pad(x, ((0, 0), (0, SIZE - 37), (0, 0), (0, 0)), "symmetric")
    old = trained(mirrored, training=False).numpy()[:, : 4 * 37]
    assert psnr_float(old, trained(x, training=False).numpy()) < 35


def test_a_short_overlap_is_refused_naming_the_one_that_reaches_45_db(trained, exported):
    from sr.deploy.export import check_windows

    exported.overlap = 2
    try:
        with pytest.raises(ExportCheckError) as e:
            check_windows(trained, exported, lr(54, 54))
    finally:
        exported.overlap = 21
    message = str(e.value)
    assert "overlapping by 2 pixels" in message and "below 45 dB" in message
    assert "--overlap" in message and "reaches" in message


def test_overlap_options_are_checked_before_any_work():
    check_export_request("tflite", "int8", None, 256)  # int8 without --calibration: the photos
    check_export_request("tflite", None, None, 256, overlap=127)
    with pytest.raises(ValueError, match="--overlap 128 leaves nothing of a --size 256 window"):
        check_export_request("tflite", None, None, 256, overlap=128)
    with pytest.raises(ValueError, match="--overlap 1: use at least 2"):
        check_export_request("onnx", None, None, 256, overlap=1)


def test_the_default_calibration_set_is_scikit_images_photos():
    from sr.deploy.export import DEFAULT_CALIBRATION, calibration_inputs

    tiles = calibration_inputs(None, 4, 3, 32, 16)
    assert len(tiles) == len(DEFAULT_CALIBRATION) == 4
    assert all(t.shape == (1, 32, 32, 3) for t in tiles)
    assert len({float(t.mean()) for t in tiles}) == 4  # four photos, not one repeated
