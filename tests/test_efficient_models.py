"""RLFN and SPAN: the papers' sizes and costs, SPAN's re-parameterised conv against its branches,
and a tiny train -> evaluate -> upscale round trip of each in both data modes and in RGB."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tensorflow as tf
from omegaconf import OmegaConf

from sr.inference import Upscaler, receptive_radius
from sr.models.complexity import macs_per_output_megapixel, parameters
from sr.models.registry import make_model
from sr.models.rlfn import MIN_SIZE
from sr.models.span.net import Conv3XC
from tests.conftest import photo
from tests.fake_run import load_script as script

NTIRE = {"features": 46, "mid_features": 48, "blocks": 4}  # RLFN's challenge entry


def conv(k: int, c_in: int, c_out: int) -> int:
    return k * k * c_in * c_out + c_out


def rlfn_params(c: int, f: int, mid: int, blocks: int, s: int = 4, esa: int = 16) -> int:
    """RLFN by the reference code's layers (bytedance/RLFN, model/block.py): head, RLFBs (three
    3x3 convs, a 1x1, ESA of five convs), the body's 3x3, the upsampler's 3x3 to C s^2."""
    esa_params = conv(1, f, esa) + conv(1, esa, esa) + 2 * conv(3, esa, esa) + conv(1, esa, f)
    block = conv(3, f, mid) + conv(3, mid, mid) + conv(3, mid, f) + conv(1, f, f) + esa_params
    return conv(3, c, f) + blocks * block + conv(3, f, f) + conv(3, f, c * s * s)


def span_params(c: int, f: int, blocks: int = 6, s: int = 4) -> int:
    """SPAN as deployed (hongyuanyu/SPAN, span_arch.py, each Conv3XC its fused 3x3): head, 3 convs
    per SPAB, the conv after the blocks, the 1x1 fusion of 4 f channels, the upsampler."""
    return (
        conv(3, c, f)
        + blocks * 3 * conv(3, f, f)
        + conv(3, f, f)
        + conv(1, 4 * f, f)
        + conv(3, f, c * s * s)
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, build, published",
    [
        ("RLFN, 52 features (paper, x4)", lambda: make_model("rlfn", 4, 3), 543e3),
        ("RLFN-S, 48 features (paper, x4)", lambda: make_model("rlfn", 4, 3, features=48), 470e3),
        ("RLFN, NTIRE 2022 entry", lambda: make_model("rlfn", 4, 3, **NTIRE), 317e3),
        ("SPAN, 52 features (paper, x4)", lambda: make_model("span", 4, 3, features=52), 498e3),
    ],
)
def test_parameters_are_the_papers(name, build, published):
    """Within 5 % of the papers' counts (in fact within 0.2 %), and exactly the reference code's
    layers counted by hand."""
    model = build()
    n = parameters(model)
    assert abs(n - published) / published < 0.005, (name, n)
    if "SPAN" in name:
        assert n == span_params(3, 52)
        assert model.count_params() > 4 * n  # trained over-parameterised: the branches' weights
    else:
        f, mid, blocks = {543e3: (52, 52, 6), 470e3: (48, 48, 6), 317e3: (46, 48, 4)}[published]
        assert n == model.count_params() == rlfn_params(3, f, mid, blocks)


def test_multiply_adds_are_the_challenge_figure():
    """RLFN's NTIRE 2022 entry: 19.70 G FLOPs (multiply-adds) for a 256 x 256 LR input, x4, RGB
    (bytedance/RLFN README); a 1024 x 1024 output is 1.048576 megapixels."""
    g = macs_per_output_megapixel(make_model("rlfn", 4, 3, **NTIRE), 4) * 1.048576
    assert g == pytest.approx(19.70, rel=0.01)


def test_conv3xc_is_the_sum_of_its_branches():
    """The fused conv equals the reference's training path: zero padding, 1x1 -> 3x3 (unpadded)
    -> 1x1, plus the 1x1 skip on the unpadded input, border pixels included."""
    rng = np.random.default_rng(0)
    layer = Conv3XC(5)
    x = rng.normal(size=(2, 9, 11, 3)).astype(np.float32)
    layer(x)
    for w in layer.weights:
        w.assign(rng.normal(size=w.shape).astype(np.float32) * 0.3)
    branch = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0))) @ layer.w1.numpy() + layer.b1.numpy()
    branch = tf.nn.conv2d(branch, layer.w2.numpy(), 1, "VALID").numpy() + layer.b2.numpy()
    branch = branch @ layer.w3.numpy() + layer.b3.numpy()
    expected = branch + x @ layer.w_skip.numpy() + layer.b_skip.numpy()
    np.testing.assert_allclose(layer(x).numpy(), expected, atol=2e-5 * np.abs(expected).max())
    assert layer.deployed_parameters() == conv(3, 3, 5)


@pytest.mark.slow
def test_span_is_local_and_tiles_exactly():
    """SPAN's receptive field is its 21 3x3 convs (head, 6 x 3, tail, upsampler): the tiler
    overlaps that much and tiled equals untiled."""
    model = make_model("span", 4, 1, features=8)
    assert receptive_radius(model) == 21
    image = np.ascontiguousarray(photo("astronaut")[100:180, 120:220])
    up = Upscaler(model, 4)
    assert np.abs(up(image, tile=24).astype(int) - up(image)).max() <= 1


def test_rlfn_attention_pools_so_its_tiles_are_close_not_exact():
    """ESA pools on a stride-6 grid anchored at the tile's corner: the receptive field is unknown
    to the tiler (None: it overlaps tiles by its fallback, 32 pixels), and tiled output is
    close to, not equal to, untiled. RLFN needs inputs of at least 15 x 15."""
    model = make_model("rlfn", 4, 1, features=8, blocks=2)
    assert receptive_radius(model) is None
    for h, w in [(MIN_SIZE, MIN_SIZE), (17, 23), (40, 31)]:
        out = model(np.zeros((1, h, w, 1), np.float32))
        assert tuple(out.shape) == (1, 4 * h, 4 * w, 1)
    image = np.ascontiguousarray(photo("astronaut")[100:200, 120:240])
    up = Upscaler(model, 4)
    whole, tiled = up(image).astype(float), up(image, tile=48).astype(float)
    psnr = 10 * np.log10(255**2 / max(np.mean((whole - tiled) ** 2), 1e-10))
    assert psnr > 40


@pytest.mark.slow
@pytest.mark.parametrize(
    "model, mode, channels",
    [
        ("rlfn", "tfrecord", "y"),
        ("span", "generator", "rgb"),
        ("rrdbnet", "tfrecord", "rgb"),  # the recipe tests train every model on Y
    ],
)
def test_train_evaluate_upscale(folders, tmp_path, compose, model, mode, channels):
    """Each new model (RLFN, SPAN, and ESRGAN's RRDBNet, sized in tests/test_rrdbnet.py) trains a
    few steps, then evaluates and upscales a photo through the scripts users run; between them
    both data modes and both Y and RGB (the data modes and channels are the model's input, not
    its kind: tests/test_recipes.py trains every model on Y)."""
    from sr.train.app import run

    small = "model.features=8 model.blocks=1".split() + ["model.growth=8"] * (model == "rrdbnet")
    shards = [f"data.data_root={tmp_path / 'root'}", "data.num_shards=2"]
    cfg = compose(
        f"model={model}",
        *small,
        f"data={mode}",
        f"data.hr_dir={folders / 'train'}",
        "data.val_dir=null",  # validated by evaluate.py below
        *(shards if mode == "tfrecord" else []),
        f"data.channels={channels}",
        "data.batch_size=4",
        "train.steps=2",
        "train.ckpt_every=2",
        "train.log_every=1",
    )
    run_dir = tmp_path / "run"
    result = run(cfg, run_dir)
    assert result["step"] == 2  # a NaN loss would have raised (NonFiniteError)
    (run_dir / ".hydra").mkdir()
    OmegaConf.save(cfg, run_dir / ".hydra" / "config.yaml")  # as train.py's Hydra writes it

    out = tmp_path / "eval"
    assert script("evaluate").main([str(run_dir), str(folders / "val"), "--out", str(out)]) == 0
    assert (out / "results.csv").is_file()
    entry = json.loads((out / "results.json").read_text())["val"]
    assert entry["n"] == 2 and np.isfinite(entry["psnr"]) and np.isfinite(entry["ssim"])

    src = tmp_path / "in.png"
    from PIL import Image

    Image.fromarray(photo("coffee")[:40, :50]).save(src)
    dst = tmp_path / "out.png"
    assert script("upscale").main([str(run_dir), str(src), str(dst)]) == 0
    assert Image.open(dst).size == (200, 160)


def test_rlfn_leaky_relu_is_keras_leaky_relu():
    """RLFN's ``max(x, a x)`` (which TensorFlow's remapper fuses without failing) has Keras's
    ``LeakyReLU`` values and gradients."""
    import keras

    from sr.models.rlfn.net import LeakyReLU

    x = tf.constant(np.random.default_rng(0).normal(size=(4, 5)).astype(np.float32))
    ours, theirs = LeakyReLU(0.05), keras.layers.LeakyReLU(negative_slope=0.05)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        a, b = ours(x), theirs(x)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    np.testing.assert_array_equal(tape.gradient(a, x).numpy(), tape.gradient(b, x).numpy())


def test_span_reparameterized_is_the_same_function_in_plain_convolutions():
    """The deployed copy: each Conv3XC a Conv2D with its fused weights, the same outputs, and as
    many weights as the paper counts (what exports convert)."""
    import keras

    from sr.models.layers import deployed as reparameterize

    keras.utils.set_random_seed(0)
    model = make_model("span", 4, 3, features=8, bicubic_skip=True)
    rng = np.random.default_rng(0)
    for w in model.weights:
        w.assign(w.numpy() + rng.normal(0, 0.02, w.shape).astype(np.float32))
    deployed = reparameterize(model)
    kinds = {type(layer).__name__ for layer in deployed.layers}
    assert "Conv3XC" not in kinds and "Conv2D" in kinds
    assert deployed.count_params() == parameters(model) == span_params(3, 8)
    x = rng.random((2, 20, 23, 3), dtype=np.float32)
    expected = model(x).numpy()
    np.testing.assert_allclose(deployed(x).numpy(), expected, atol=1e-5 * np.abs(expected).max())
    plain = make_model("rlfn", 4, 1, features=8, blocks=1)
    assert reparameterize(plain) is plain
