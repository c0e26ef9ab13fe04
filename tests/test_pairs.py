"""The shared graph stage: flips stay aligned and LR is the MATLAB bicubic of its HR."""

import numpy as np
import tensorflow as tf

from sr.data.degrade import bicubic_downscale, quantize
from sr.data.pairs import make_pairs
from tests.conftest import photo

S, M, P = 4, 8, 96


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
    lr, hr = make_pairs(tf.constant(batch), S, M, flip=True, rot90=True, seed=3)
    lr, hr = lr.numpy()[..., 0] * 255, hr.numpy()[..., 0] * 255
    assert lr.shape == (32, 24, 24) and hr.shape == (32, 96, 96)
    seen = set()
    for i in range(len(batch)):
        ref_lr = quantize(bicubic_downscale(batch[i].astype(np.float32), S, margin=M)).numpy()
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


def test_flip_off_is_identity_and_values_in_unit_range():
    batch = _batch(4)
    lr, hr = make_pairs(tf.constant(batch), S, M, flip=False)
    np.testing.assert_array_equal(hr.numpy()[..., 0] * 255, batch[:, M:-M, M:-M, 0])
    assert lr.dtype == tf.float32 and 0 <= lr.numpy().min() and lr.numpy().max() <= 1
    grid = lr.numpy() * 255
    np.testing.assert_allclose(grid, np.rint(grid), atol=1e-3)  # LR on the 8-bit grid


def test_premade_lr_gets_the_same_flips():
    hr = _batch(16)[:, M:-M, M:-M]
    lr = np.ascontiguousarray(hr[:, 1::4, 2::4])  # any LR: only the flip bookkeeping is tested
    out_lr, out_hr = make_pairs(tf.constant(hr), S, 0, lr=tf.constant(lr), flip=True, seed=1)
    for i in range(16):
        for k, v in _transforms(hr[i, ..., 0]).items():
            if np.array_equal(np.rint(out_hr.numpy()[i, ..., 0] * 255), v):
                np.testing.assert_array_equal(
                    np.rint(out_lr.numpy()[i, ..., 0] * 255), _transforms(lr[i, ..., 0])[k]
                )
                break
        else:
            raise AssertionError(f"sample {i}: HR is not a flip of its source")
