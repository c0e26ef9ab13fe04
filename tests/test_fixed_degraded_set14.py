"""benchmarks/fixed_degraded_set14.py: the fixed degraded LR set is the same every time, HR // 4
in size, pairs with its HR for evaluate.py --lr-dir, and carries its blur and noise."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from sr.core.images import list_images, load_image
from sr.evaluation import match_lr_files
from tests.conftest import photo, write_photos
from tests.fake_run import load_script

fixed = load_script("fixed_degraded_set14", "benchmarks")


@pytest.fixture
def hr_folder(tmp_path):
    """Two real photos, one RGB and one gray, 66 x 74 (not multiples of 4)."""
    return write_photos(tmp_path / "hr", size=66, names=("coffee", "camera"))[0].parent


def test_the_set_is_byte_identical_every_time_and_hr_over_4(hr_folder, tmp_path):
    first = fixed.write_set(hr_folder, tmp_path / "a")
    second = fixed.write_set(hr_folder, tmp_path / "b")
    assert [p.name for p in first] == ["camera_00.png", "coffee_00.png"]
    assert [p.read_bytes() for p in first] == [p.read_bytes() for p in second]
    modes = []
    for lr_path in first:
        with Image.open(lr_path) as lr, Image.open(hr_folder / lr_path.name) as hr:
            assert lr.size == (hr.width // 4, hr.height // 4) == (18, 16)
            modes.append((lr.mode, hr.mode))
    assert modes == [("L", "L"), ("RGB", "RGB")]  # a gray HR stays gray
    assert match_lr_files(list_images(hr_folder), tmp_path / "a", 4) == first
    with pytest.raises(ValueError, match="not an empty folder"):
        fixed.write_set(hr_folder, tmp_path / "a")


def test_the_noise_is_there_and_seeded_per_image(hr_folder):
    hr = load_image(hr_folder / "coffee_00.png")
    clean = fixed.degrade(hr, 0, noise_sigma=0, jpeg_quality=None).astype(float)
    noisy = fixed.degrade(hr, 0, jpeg_quality=None).astype(float)
    assert 8.5 < np.std(noisy - clean) < 11.5  # sigma 10, before JPEG (864 samples)
    other = fixed.degrade(hr, 1, jpeg_quality=None).astype(float)
    assert np.std(other - noisy) > 10  # another image index draws other noise
    final = fixed.degrade(hr, 0).astype(float)
    assert np.std(final - fixed.degrade(hr, 0, noise_sigma=0).astype(float)) > 3


def test_the_blur_is_scipys_gaussian_filter_with_mirror_padding():
    ndimage = pytest.importorskip("scipy.ndimage")
    x = photo("chelsea")[:40, :50].astype(np.float64)  # a real photo, RGB
    reference = ndimage.gaussian_filter(x, sigma=(1.2, 1.2, 0), mode="mirror", radius=(10, 10, 0))
    np.testing.assert_allclose(fixed.blur(x), reference, rtol=0, atol=1e-9)
    assert fixed.gaussian_taps().sum() == pytest.approx(1.0, abs=1e-15)
