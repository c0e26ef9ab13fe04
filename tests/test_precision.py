"""``train.precision`` (:mod:`sr.train.precision`): the precision chosen for each device and CPU,
the one warning of a fallback, the refusal of the old ``train.mixed_precision``, and training
steps under ``mixed_bfloat16`` (the pixel step, under XLA too; the GAN step with the spectral
norm and the perceptual loss's VGG) against the same steps in float32."""

from __future__ import annotations

import logging
import runpy
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from sr.config import ConfigError, check_overrides
from sr.core.batch import Batch, SharpenedBatch
from sr.losses import Loss
from sr.models.discriminator import build_unet_discriminator
from sr.models.registry import make_model
from sr.models.vgg import build_torch_vgg_features
from sr.train import precision as P
from sr.train.gan import GANStep
from sr.train.step import TrainStep
from tests.conftest import ROOT


@pytest.fixture
def policy():
    """Set Keras's global policy for one test (``policy("mixed_bfloat16")``), float32 after."""
    yield keras.mixed_precision.set_global_policy
    keras.mixed_precision.set_global_policy("float32")


AMX = frozenset({"avx512f", "amx_tile", "amx_bf16"})
OLD = frozenset({"avx2", "avx512f"})  # an AVX-512 CPU without bfloat16 (Skylake-SP)


@pytest.mark.parametrize(
    "asked, kind, flags, capabilities, used, reason",
    [
        ("float32", "CPU", None, None, "float32", ""),
        ("bfloat16", "CPU", AMX, None, "bfloat16", ""),
        ("bfloat16", "CPU", frozenset({"avx512_bf16"}), None, "bfloat16", ""),
        ("bfloat16", "CPU", OLD, None, "float32", "neither the avx512_bf16 nor the amx_bf16"),
        ("bfloat16", "CPU", None, None, "bfloat16", ""),  # flags unknown (not Linux): as asked
        ("bfloat16", "GPU", None, [(8, 0), (9, 0)], "bfloat16", ""),
        ("bfloat16", "GPU", None, [(8, 6), (7, 5)], "float32", "this one has 7.5"),
        ("bfloat16", "TPU", None, None, "bfloat16", ""),
        ("float16", "GPU", None, [(7, 0)], "float16", ""),
        ("float16", "CPU", AMX, None, "float32", "GPU only, and this run is on a CPU"),
        ("float16", "TPU", None, None, "float32", "on a TPU"),
    ],
)
def test_the_precision_used_for_each_device(asked, kind, flags, capabilities, used, reason):
    got = P.choose(asked, kind, flags, capabilities)
    assert (got.asked, got.used) == (asked, used)
    assert (reason in got.reason) and (bool(got.reason) == bool(reason))
    assert got.policy == {"float32": "float32", "bfloat16": "mixed_bfloat16"}.get(
        used, "mixed_float16"
    )
    assert got.loss_scale == (used == "float16")


def test_an_unknown_precision_is_refused():
    with pytest.raises(ValueError, match="float32, bfloat16, float16, got 'half'"):
        P.choose("half", "CPU")


def test_cpu_flags_come_from_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text(
        "processor\t: 0\nmodel name\t: Intel(R) Xeon(R)\nflags\t\t: fpu avx512f amx_bf16\n\n"
        "processor\t: 1\nflags\t\t: fpu\n"
    )
    assert P.cpu_flags(info) == {"fpu", "avx512f", "amx_bf16"}  # the first CPU's
    assert P.cpu_flags(tmp_path / "absent") is None
    (tmp_path / "noflags").write_text("processor\t: 0\n")
    assert P.cpu_flags(tmp_path / "noflags") is None


def test_a_cpu_without_bfloat16_falls_back_to_float32_with_one_warning(
    monkeypatch, caplog, policy
):
    monkeypatch.setattr(P, "device_kind", lambda strategy=None: "CPU")
    monkeypatch.setattr(P, "cpu_flags", lambda: OLD)
    with caplog.at_level(logging.INFO, logger="sr.train.precision"):
        got = P.setup_precision("bfloat16")
    assert got.used == "float32" and keras.mixed_precision.global_policy().name == "float32"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "avx512_bf16" in warnings[0].getMessage()
    assert "training in float32" in warnings[0].getMessage()

    monkeypatch.setattr(P, "cpu_flags", lambda: AMX)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="sr.train.precision"):
        got = P.setup_precision("bfloat16")
    assert got.used == "bfloat16" and not got.loss_scale
    assert keras.mixed_precision.global_policy().name == "mixed_bfloat16"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_the_device_kind_of_a_strategy():
    mirrored = tf.distribute.MirroredStrategy(["/cpu:0"])
    assert P.device_kind(mirrored) == "CPU"
    want = "GPU" if tf.config.list_logical_devices("GPU") else "CPU"
    assert P.device_kind(tf.distribute.get_strategy()) == want


def test_the_old_key_is_refused_before_any_work_naming_the_new_one(monkeypatch, capsys, tmp_path):
    with pytest.raises(ConfigError, match="train.mixed_precision is no longer a key") as info:
        check_overrides(["train.mixed_precision=true"])
    assert "train.precision=float32|bfloat16|float16" in str(info.value)
    # train.py: exit 2 with the message, before Hydra makes the run folder
    run_dir = tmp_path / "run"
    argv = ["train.py", "train.mixed_precision=true", f"hydra.run.dir={run_dir}"]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit) as exit_:
        runpy.run_path(str(ROOT / "train.py"), run_name="__main__")
    assert exit_.value.code == 2
    assert "train.precision=" in capsys.readouterr().err
    assert not run_dir.exists()


def tiny_edsr(policy_name: str, weights=None) -> keras.Model:
    keras.mixed_precision.set_global_policy(policy_name)
    keras.utils.set_random_seed(0)
    keys = {"features": 16, "blocks": 2, "direct_upsample": True, "bicubic_skip": True}
    model = make_model("edsr", 2, 1, **keys)
    if weights is not None:
        model.set_weights(weights)
    return model


def batch(channels=1, side=12, scale=2, n=4):
    rng = np.random.default_rng(5)
    lr = tf.constant(rng.random((n, side, side, channels), np.float32))
    hr = tf.constant(rng.random((n, scale * side, scale * side, channels), np.float32))
    return lr, hr


def counters():
    return tuple(tf.Variable(v, dtype=tf.int64) for v in (0, -1, 0))


def cosine(a, b) -> float:
    a = np.concatenate([np.ravel(x) for x in a]).astype(np.float64)
    b = np.concatenate([np.ravel(x) for x in b]).astype(np.float64)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


# 2.7 s; with XLA 4 s on a 2-core CPU, 25 s when it is loaded (compiling): marked slow
@pytest.mark.parametrize("xla", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_a_bfloat16_step_computes_the_float32_step_in_bfloat16(policy, xla):
    """The same weights and batch: under mixed_bfloat16 the variables stay float32, the SR is
    float32, the loss (float32) agrees with float32's within bfloat16's rounding (8 bits of
    mantissa: 2^-8 = 0.4 %), the gradient points the same way, and the step updates the float32
    weights; under XLA too (``train.xla``)."""
    lr, hr = batch()
    reference = tiny_edsr("float32")
    model = tiny_edsr("mixed_bfloat16", reference.get_weights())
    assert model.layers[2].compute_dtype == "bfloat16"
    assert {w.dtype for w in model.weights} == {"float32"}
    assert model(lr).dtype == tf.float32
    steps = {}
    for name, m in (("float32", reference), ("bfloat16", model)):
        opt = keras.optimizers.Adam(1e-3)
        opt.build(m.trainable_variables)
        steps[name] = TrainStep(
            m, opt, Loss({"l1": {}}), tf.distribute.get_strategy(), 4, counters(), xla=xla
        )
    pair = Batch(lq=lr, gt=hr)
    (l32, g32), (l16, g16) = (steps[k].gradients(pair) for k in ("float32", "bfloat16"))
    assert l16.dtype == tf.float32 and all(g.dtype == tf.float32 for g in g16)
    assert float(l16) == pytest.approx(float(l32), rel=1e-2)
    assert float(l16) != float(l32)  # it did compute in bfloat16
    assert cosine(g16, g32) > 0.99
    before = [w.numpy() for w in model.trainable_variables]
    loss = steps["bfloat16"].train_step(pair)
    assert np.isfinite(float(loss))
    assert all(w.dtype == "float32" for w in model.trainable_variables)
    assert any(not np.array_equal(b, w.numpy()) for b, w in zip(before, model.trainable_variables))
    if xla:
        assert steps["bfloat16"].replica_step._jit_compile


def gan_parts(policy_name: str, weights=None):
    keras.mixed_precision.set_global_policy(policy_name)
    keras.utils.set_random_seed(2)
    g = make_model("edsr", 2, 3, features=8, blocks=1, direct_upsample=True, bicubic_skip=True)
    d = build_unet_discriminator(3, features=4)
    vgg = build_torch_vgg_features(channels=(4,) * 16)
    if weights is not None:
        for model, w in zip((g, d, vgg), weights):
            model.set_weights(w)
    return g, d, vgg


@pytest.mark.slow
def test_the_gan_step_under_bfloat16(policy):
    """Real-ESRGAN's GAN step (L1, a VGG perceptual term, the GAN terms) under mixed_bfloat16:
    the discriminator's spectral norm keeps its float32 ``weight_u`` / ``weight_v`` (read
    without autocasting) and computes its power iteration and sigma in float32, the
    discriminator's logits and every term are float32 and agree with float32's within bfloat16
    rounding, and both networks' gradients point the same way."""
    lr, hr = batch(channels=3, side=16)
    reference = gan_parts("float32")
    parts = gan_parts("mixed_bfloat16", [m.get_weights() for m in reference])
    got = {}
    for name, (g, d, vgg) in (("float32", reference), ("bfloat16", parts)):
        loss = Loss({"l1": {}, "perceptual": {}, "gan": {}})
        loss.terms[1].vgg = vgg  # the perceptual term's VGG19
        g_opt, d_opt = keras.optimizers.Adam(1e-4), keras.optimizers.Adam(1e-4)
        g_opt.build(g.trainable_variables), d_opt.build(d.trainable_variables)
        step = GANStep(g, g_opt, loss, tf.distribute.get_strategy(), 4, counters(),
                       discriminator=d, d_optimizer=d_opt)  # fmt: skip
        got[name] = step.gradients(SharpenedBatch(lq=lr, gt_usm=hr, gt=hr))
    g, d, vgg = parts
    assert vgg.get_layer("conv1_1").compute_dtype == "bfloat16"
    assert d.layers[1].compute_dtype == "bfloat16" and d(hr).dtype == tf.float32
    norms = [w for w in d.weights if "weight_u" in w.path or "weight_v" in w.path]
    assert norms and {w.dtype for w in norms} == {"float32"}
    # the three power iterations of the step (D(SR), D(HR), D(SR)) ran in float32 from the
    # kernel as bfloat16 reads it: u and v as float32's
    ref = [w for w in reference[1].weights if "weight_u" in w.path or "weight_v" in w.path]
    for a, b in zip(norms, ref):
        assert cosine([a.numpy()], [b.numpy()]) > 0.999, a.path
    (t32, g32, d32), (t16, g16, d16) = got["float32"], got["bfloat16"]
    assert t16.dtype == tf.float32
    # the guard's loss, l1, perceptual, gan, d_real_loss, d_fake_loss: within 2 % (the mean
    # logits are near 0)
    np.testing.assert_allclose(t16.numpy()[:6], t32.numpy()[:6], rtol=2e-2)
    assert cosine(g16, g32) > 0.98 and cosine(d16, d32) > 0.98


@pytest.mark.slow  # two short training runs
def test_a_bfloat16_run_resumes_in_float32(folders, tmp_path, compose, policy, caplog):
    """``train.precision=bfloat16``: 2 steps on one device (in process), resumed in float32 for
    a third (checkpoints hold float32 variables in every precision); on a CPU without bfloat16
    instructions, the same run in float32 after one warning. ``train.py`` in bfloat16 with XLA
    under ``MirroredStrategy``: tests/test_distribute.py::test_xla_inside_the_mirrored_strategy."""
    from sr.train.app import run

    base = (
        "data=generator", f"data.hr_dir={folders / 'train'}", "data.val_dir=null",
        "data.batch_size=4", "train.log_every=1", "model.features=[16,8]",
    )  # fmt: skip
    run_dir = tmp_path / "one"
    with caplog.at_level(logging.INFO):
        run(compose(*base, "train.steps=2", "train.precision=bfloat16"), run_dir)
    assert_precision_logged(caplog.text)
    assert "final step 2:" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO):
        run(
            compose(*base, "train.steps=3", "train.precision=float32", f"resume={run_dir}"),
            run_dir,
        )
    assert keras.mixed_precision.global_policy().name == "float32"
    assert f"resumed from {run_dir / 'checkpoints' / 'ckpt-2'} at step 2" in caplog.text
    assert "final step 3:" in caplog.text


def assert_precision_logged(out: str) -> None:
    """``out`` (a run's log) says how ``train.precision=bfloat16`` ran on this CPU: as asked
    where it has bfloat16 instructions, else in float32 after one warning."""
    if set(P.CPU_BF16_FLAGS) & (P.cpu_flags() or set()):
        assert "train.precision=bfloat16 on the CPU: Keras policy mixed_bfloat16" in out, out
    else:
        assert out.count("train.precision=bfloat16: this CPU has no bfloat16") == 1, out


def test_the_spectral_norm_reads_u_and_v_in_float32_under_bfloat16(policy):
    """Inside a layer's call a mixed policy reads float variables in the compute dtype; the
    spectral norm's ``weight_u`` and ``weight_v`` are exempt (``autocast=False``), so the power
    iteration's vectors keep float32 from step to step."""
    from sr.models.spectral_norm import SpectralNorm

    seen = {}

    class Probe(SpectralNorm):
        def call(self, inputs, training=None):
            seen["kernel"] = keras.ops.convert_to_tensor(self.layer.kernel).dtype
            seen["u"] = keras.ops.convert_to_tensor(self.weight_u).dtype
            seen["v"] = keras.ops.convert_to_tensor(self.weight_v).dtype
            return super().call(inputs, training)

    policy("mixed_bfloat16")
    layer = Probe(keras.layers.Conv2D(4, 3, padding="same"))
    out = layer(tf.ones((1, 8, 8, 3)), training=True)
    assert out.dtype == tf.bfloat16 and seen["kernel"] == "bfloat16"  # the policy's reading
    assert seen["u"] == seen["v"] == "float32"
