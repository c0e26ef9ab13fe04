"""The shared graph stage: flips stay aligned and LR is ``make_lr`` of its HR, the rounded Y."""

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from sr.core.color import y_channel
from sr.core.degrade import crop_margin, make_lr
from sr.core.images import load_y
from sr.data.pairs import make_pairs
from tests.conftest import photo

S, P = 4, 96
M = crop_margin(S)  # 8


def _batch(n=32):
    y = photo("astronaut")[..., 1]
    rng = np.random.default_rng(0)
    crops = []
    for _ in range(n):
        r, c = rng.integers(0, y.shape[0] - P - 2 * M, size=2)
        crops.append(y[r : r + P + 2 * M, c : c + P + 2 * M])
    return np.stack(crops)[..., None]


def _transforms(x):
    """The 8 rotations/reflections of [H, W] (flips and transposes), keyed by name."""
    out = {}
    for t in (False, True):
        base = x.T if t else x
        for v in (False, True):
            for h in (False, True):
                z = base[::-1] if v else base
                out[(t, v, h)] = z[:, ::-1] if h else z
    return out


def test_flips_apply_identically_to_lr_and_hr_and_lr_is_exact():
    batch = _batch()
    lr, hr = make_pairs(tf.constant(batch), S, M, flips="hv", rot90=True, seed=[3, 0])
    lr, hr = lr.numpy()[..., 0] * 255, hr.numpy()[..., 0] * 255
    assert lr.shape == (32, 24, 24) and hr.shape == (32, 96, 96)
    seen = set()
    for i in range(len(batch)):
        ref_lr = make_lr(batch[i], S, margin=M).numpy()  # direct form, one crop
        ref_hr = batch[i, M:-M, M:-M, 0].astype(np.float32)
        matches = [k for k, v in _transforms(ref_hr).items() if np.array_equal(np.rint(hr[i]), v)]
        assert matches, f"sample {i}: HR is not a rotation/reflection of its source patch"
        key = matches[0]
        seen.add(key)
        want = _transforms(ref_lr[..., 0])[key]
        # exact up to a float32 rounding tie: at most one grey level on a few pixels
        diff = np.abs(lr[i] - want)
        assert diff.max() <= 1.0 + 1e-4 and (diff > 0.5).mean() < 0.01, f"sample {i} misaligned"
    assert len(seen) >= 6, f"only {len(seen)} of the 8 transforms in 32 draws"


def test_horizontal_flips_only_mirror_left_right_with_the_coins_of_hv():
    """``data.flips=h`` (Real-ESRGAN's ``use_hflip``): each pair is its crop or the crop's
    left-right mirror, about half each, and a sample mirrored under ``h`` is one whose
    horizontal coin came up under ``hv`` (the same draws)."""
    batch = _batch()
    seed = [7, 2]
    lr, hr = make_pairs(tf.constant(batch), S, M, flips="h", seed=seed)
    _, hr_hv = make_pairs(tf.constant(batch), S, M, flips="hv", seed=seed)
    mirrored = []
    for i in range(len(batch)):
        src = batch[i, M:-M, M:-M, 0].astype(np.float32)
        got = hr.numpy()[i, ..., 0] * 255
        if np.array_equal(got, src[:, ::-1]):
            mirrored.append(True)
        else:
            np.testing.assert_array_equal(got, src)
            mirrored.append(False)
        ref_lr = make_lr(batch[i], S, margin=M).numpy()[..., 0]
        want = ref_lr[:, ::-1] if mirrored[-1] else ref_lr
        assert np.abs(lr.numpy()[i, ..., 0] * 255 - want).max() <= 1.0 + 1e-4
        hv = _transforms(src)
        h_coin = [k for k, v in hv.items() if np.array_equal(hr_hv.numpy()[i, ..., 0] * 255, v)]
        assert h_coin and h_coin[0][2] == mirrored[-1], f"sample {i}: not hv's horizontal coin"
    assert 8 <= sum(mirrored) <= 24, f"{sum(mirrored)} of 32 mirrored"


def test_an_unknown_flips_value_is_refused():
    with pytest.raises(ValueError, match="data.flips='v': choose one of hv, h, none"):
        make_pairs(tf.constant(_batch(2)), S, M, flips="v")


def test_flip_off_is_identity_and_values_in_unit_range():
    batch = _batch(4)
    lr, hr = make_pairs(tf.constant(batch), S, M, flips="none")
    np.testing.assert_array_equal(hr.numpy()[..., 0] * 255, batch[:, M:-M, M:-M, 0])
    assert lr.dtype == tf.float32 and 0 <= lr.numpy().min() and lr.numpy().max() <= 1
    grid = lr.numpy() * 255
    np.testing.assert_allclose(grid, np.rint(grid), atol=1e-3)  # LR on the 8-bit grid


def test_premade_lr_gets_the_same_flips():
    hr = _batch(16)[:, M:-M, M:-M]
    lr = np.ascontiguousarray(hr[:, 1::4, 2::4])  # any LR: only the flip bookkeeping is tested
    out_lr, out_hr = make_pairs(tf.constant(hr), S, 0, lr=tf.constant(lr), flips="hv", seed=[1, 0])
    for i in range(16):
        for k, v in _transforms(hr[i, ..., 0]).items():
            if np.array_equal(np.rint(out_hr.numpy()[i, ..., 0] * 255), v):
                np.testing.assert_array_equal(
                    np.rint(out_lr.numpy()[i, ..., 0] * 255), _transforms(lr[i, ..., 0])[k]
                )
                break
        else:
            raise AssertionError(f"sample {i}: HR is not a flip of its source")


def test_training_makes_lr_from_the_rounded_y(tmp_path):
    """Training's order: decode to the rounded uint8 Y (``load_y``), then LR (``make_lr``)."""
    rgb = photo("coffee")[:200, :300]  # a real colour photo
    Image.fromarray(rgb).save(tmp_path / "coffee.png")
    y = load_y(tmp_path / "coffee.png")
    np.testing.assert_array_equal(y, y_channel(rgb))  # uint8, rounded
    crops = np.stack([y[r : r + P + 2 * M, c : c + P + 2 * M] for r, c in [(0, 0), (40, 120)]])
    crops = tf.constant(crops[..., None])
    lr, hr = make_pairs(crops, S, M, flips="none")
    np.testing.assert_array_equal(lr.numpy() * 255, make_lr(crops, S, M).numpy())
    np.testing.assert_array_equal(hr.numpy() * 255, crops.numpy()[:, M:-M, M:-M])
    # Not evaluation's order (LR of the RGB, then Y): the 8-bit rounding sits in between.
    rgb_crop = rgb[40 : 40 + P + 2 * M, 120 : 120 + P + 2 * M]
    eval_lr_y = y_channel(make_lr(rgb_crop, S, M).numpy().astype(np.float64))
    assert np.abs(lr.numpy()[1, ..., 0] * 255 - eval_lr_y).mean() > 0.1


def test_premade_lr_with_a_margin_is_refused():
    hr = tf.zeros([2, P + 2 * M, P + 2 * M, 1], tf.uint8)
    with pytest.raises(ValueError, match="use margin=0"):
        make_pairs(hr, S, M, lr=tf.zeros([2, P // S, P // S, 1], tf.uint8))
