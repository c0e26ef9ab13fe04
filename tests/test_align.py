"""sr.models.align (global motion compensation) against known shifts, and espcn_mf's start as the
single-frame model."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

from sr.core.color import y_channel
from sr.core.degrade import make_lr
from sr.models.align import GlobalAlign, estimate_shift, shift_frames
from sr.models.registry import make_model
from tests.conftest import photo


def lr_frames(name: str, offsets_hr, size: int = 96) -> np.ndarray:
    """LR frames (x4, float32 in [0, 1], ``[n, size/4, size/4]``) of HR crops of a photo's Y
    at integer HR offsets ``(y, x)``: frame j shows the scene moved by ``-offsets_hr[j]``."""
    y = y_channel(photo(name)).astype(np.float32)
    crops = [y[40 + oy : 40 + oy + size, 60 + ox : 60 + ox + size] for oy, ox in offsets_hr]
    return np.asarray(make_lr(np.stack(crops)[..., None], 4))[..., 0] / 255.0


@pytest.mark.parametrize("name", ["astronaut", "coffee", "camera"])
def test_estimate_shift_recovers_sub_pixel_camera_motion(name):
    """Neighbours at HR offsets of 1 to 7 pixels (0.25 to 1.75 LR pixels, every quarter) of
    sharp photographs: the estimate registers them onto the target within 1/8 LR pixel on 40x40
    LR frames, within 1/4 on 24x24 LR patches (training's), median error at most 1/8."""
    offsets = [(0, 0), (1, 0), (0, -3), (2, 5), (-7, 1), (3, 3), (-5, -6)]
    for size, tolerance in ((160, 0.125), (96, 0.25)):
        lr = lr_frames(name, offsets, size)
        target = np.repeat(lr[:1], len(offsets) - 1, axis=0)
        est = estimate_shift(tf.constant(target), tf.constant(lr[1:])).numpy()
        # frame j's content sits at -offset_j: moving it by +offset_j/4 registers it
        true = np.array(offsets[1:], np.float32) / 4
        np.testing.assert_allclose(est, true, atol=tolerance, err_msg=f"{name} {size}")
        assert np.median(np.abs(est - true)) <= 0.125


def test_estimate_shift_of_a_frame_with_itself_or_no_structure_is_zero():
    lr = lr_frames("chelsea", [(0, 0)])
    flat = np.full((1, 24, 24), 0.5, np.float32)
    assert np.all(estimate_shift(tf.constant(lr), tf.constant(lr)).numpy() == 0)
    assert np.all(estimate_shift(tf.constant(flat), tf.constant(flat)).numpy() == 0)


def test_shift_frames_moves_content_by_the_shift():
    """Integer shifts move pixels exactly (away from the mirrored borders); a sub-pixel shift of
    a smooth blob puts it where the analytic blob is."""
    yy, xx = np.mgrid[0:40, 0:44].astype(np.float32)

    def blob(cy, cx):
        return np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * 3.0**2))[None]

    x = tf.constant(blob(20, 22))
    moved = shift_frames(x, tf.constant([[2.0, -3.0]])).numpy()
    np.testing.assert_allclose(moved, blob(22, 19), atol=1e-5)
    moved = shift_frames(x, tf.constant([[0.3, -0.7]])).numpy()
    np.testing.assert_allclose(moved, blob(20.3, 21.3), atol=2e-3)
    np.testing.assert_allclose(shift_frames(x, tf.zeros((1, 2))).numpy(), x.numpy(), atol=1e-6)


@pytest.mark.parametrize("target", [0, 1, 2])
def test_global_align_registers_every_frame_on_the_target(target):
    offsets = [(0, 0), (2, -3), (5, 2)]
    lr = lr_frames("astronaut", offsets, 160)  # 40x40 LR
    window = tf.constant(lr[None, ..., None])  # [1, 3, 40, 40, 1]
    aligned = GlobalAlign(target)(window).numpy()[0, ..., 0]
    np.testing.assert_array_equal(aligned[target], lr[target])
    inner = (slice(4, -4), slice(4, -4))  # the mirrored borders aside
    for j in range(3):
        before = np.abs(lr[j] - lr[target])[inner].mean()
        after = np.abs(aligned[j] - lr[target])[inner].mean()
        assert after <= 0.25 * before + 1e-6, (j, before, after)


# Terms summed on the way to one output of ESPCN (C = 1): 5 x 5 x C by the fusion convolution,
# 3 x 3 x 64 and 3 x 3 x 32 by the next two.
ESPCN_TERMS = 5 * 5 * 1 + 3 * 3 * 64 + 3 * 3 * 32  # 889


def float32_atol(reference: np.ndarray, terms: int) -> float:
    """How far two float32 evaluations of the same network may differ when only the order of
    their sums differs (another oneDNN blocking: a 5 x 5 x 3 kernel with zeros where the other
    has 5 x 5 x 1; AVX-512 against AVX2). A sum of n float32 terms taken in another order moves
    by at most about n eps times the sum of their magnitudes (Higham, Accuracy and Stability of
    Numerical Algorithms, 2nd ed., section 4.2: |error| <= gamma_(n-1) sum |x_i|, gamma_n ~ n u,
    u = eps / 2, once for each order); tanh does not enlarge an error, and Glorot weights keep
    the sums of magnitudes of the order of the outputs, so every output is within
    ``terms * eps * max|reference|``. Here: 889 x 1.19e-7 x 0.46 = 4.9e-5, against 2.4-3.0e-7
    measured on AVX-512 (5 eps max|output|) and 1.5e-4 for neighbour weights of 1e-5 instead of 0.
    """
    return terms * np.finfo(np.float32).eps * float(np.abs(reference).max())


@pytest.mark.slow
@pytest.mark.parametrize("target_frame, index", [("last", 2), ("center", 1), (0, 0)])
def test_multi_frame_model_starts_as_the_single_frame_model(target_frame, index):
    """fusion_init=target: same seed, same weights, so the 3-frame model's output is the
    1-frame model's output on the target frame (with or without alignment), up to the order of
    float32 sums (:func:`float32_atol`)."""
    rng = np.random.default_rng(0)
    window = rng.random((2, 3, 16, 16, 1)).astype(np.float32)
    keras.utils.set_random_seed(0)
    single = make_model("espcn_mf", frames=1)(window[:, index]).numpy()
    atol = float32_atol(single, ESPCN_TERMS)
    for align in ("global", "none"):
        keras.utils.set_random_seed(0)
        multi = make_model("espcn_mf", frames=3, target_frame=target_frame, align=align)
        np.testing.assert_allclose(multi(window).numpy(), single, rtol=0, atol=atol)
    keras.utils.set_random_seed(0)
    glorot = make_model("espcn_mf", frames=3, target_frame=target_frame, fusion_init="glorot")
    assert np.abs(glorot(window).numpy() - single).max() > max(1e-3, 10 * atol)
    other = window[:, (index + 1) % 3]  # the single-frame model on another frame: far outside
    keras.utils.set_random_seed(0)
    assert np.abs(make_model("espcn_mf", frames=1)(other).numpy() - single).max() > 10 * atol


def test_bad_model_options_are_refused():
    with pytest.raises(ValueError, match=r"model.align must be one of global, none, got 'flow'"):
        make_model("espcn_mf", frames=3, align="flow")
    with pytest.raises(ValueError, match=r"model.fusion_init must be one of target, glorot"):
        make_model("espcn_mf", frames=3, fusion_init="he")
    with pytest.raises(ValueError, match=r"data.target_frame=5 is not a frame of the window"):
        make_model("espcn_mf", frames=3, target_frame=5)


@pytest.mark.slow
def test_aligned_model_trains_under_xla_and_keeps_float32_alignment_in_mixed_precision():
    """The GPU paths: the train step's forward and backward pass compile with XLA (FFTs, arg
    max and gathers included) and give the eager values; under mixed_float16 the alignment
    still computes in float32."""
    window = tf.constant(np.random.default_rng(1).random((2, 3, 16, 16, 1)), tf.float32)
    keras.utils.set_random_seed(0)
    model = make_model("espcn_mf", frames=3, fusion_init="glorot")

    def loss_and_grads(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x, training=True) - 0.5))
        return loss, tape.gradient(loss, model.trainable_variables)

    eager = loss_and_grads(window)
    compiled = tf.function(loss_and_grads, jit_compile=True)(window)
    np.testing.assert_allclose(compiled[0], eager[0], rtol=1e-4)
    for a, b in zip(compiled[1], eager[1]):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-6)
    policy = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        mixed = make_model("espcn_mf", frames=3)
        assert mixed.get_layer("align").compute_dtype == "float32"
        assert mixed.get_layer("early_fusion").compute_dtype == "float16"
        assert mixed(window).dtype == tf.float32
    finally:
        keras.mixed_precision.set_global_policy(policy)


@pytest.mark.slow
def test_fusion_oracle_shows_what_alignment_is_for():
    """benchmarks/fusion_oracle.py on 4 demo training sequences: aligned by the true path with a
    Fourier shift, 3 frames predict the validation frames better than 1; bilinear warping and no
    alignment do worse than the Fourier shift; the estimated shift keeps part of the gain (0.14
    of 0.34 dB on this subset, 0.67 of 0.82 dB fitted on all 14)."""
    from tests.fake_run import load_script

    rows = load_script("fusion_oracle", "benchmarks").main(["--limit", "4"])
    held = {label.split(",")[-1].strip(): v[1] for label, v in rows.items()}
    single, fourier = held["1 frame"], held["Fourier shift"]
    assert fourier > single + 0.3
    assert held["3 frames as they are"] < fourier - 0.3
    assert held["bilinear warp"] < fourier - 0.3
    assert held["estimated shift (align=global)"] > single + 0.25 * (fourier - single)
