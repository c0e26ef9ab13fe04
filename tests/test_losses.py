"""The ``loss`` and ``optimizer`` groups: each pixel term is its formula on [0, 1] pixels (L1
and L2 the former ``train.loss`` ones, bit for bit), AdamW composes and trains, and the defaults
are the optimizer of the runs before the groups."""

from __future__ import annotations

import hydra
import keras
import numpy as np
import pytest
import tensorflow as tf

from sr.losses import Loss

RNG = np.random.default_rng(0)
HR = RNG.random((3, 8, 10, 1), dtype=np.float32)
SR = np.clip(HR + RNG.normal(0, 0.05, HR.shape).astype(np.float32), 0, 1)


def term(name: str, **keys):
    """The built term ``name`` of ``loss.terms`` with ``keys``."""
    return Loss({name: keys}).terms[0]


def per_example(loss) -> np.ndarray:
    return loss(tf.constant(HR), tf.constant(SR)).numpy()


@pytest.mark.parametrize("eps", [1e-3, 0.1])
def test_charbonnier_is_the_numpy_formula(eps):
    want = np.sqrt((HR.astype(np.float64) - SR) ** 2 + eps**2).mean(axis=(1, 2, 3))
    got = per_example(term("charbonnier", eps=eps))
    assert got.shape == (3,)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    # LapSRN's eps: close to L1 above the smoothing, never below it
    assert (per_example(term("charbonnier")) >= per_example(term("l1"))).all()
    zero = term("charbonnier", eps=eps)(tf.constant(HR), tf.constant(HR)).numpy()
    np.testing.assert_allclose(zero, eps, rtol=1e-6)  # a perfect output costs eps


def test_l1_and_l2_are_the_former_losses_bit_for_bit():
    """The formulas of the former ``LOSSES`` table of sr/train/loop.py, exactly."""
    hr, sr = tf.constant(HR), tf.constant(SR)
    former = {
        "l1": tf.reduce_mean(tf.abs(hr - sr), axis=[1, 2, 3]).numpy(),
        "l2": tf.reduce_mean(tf.square(hr - sr), axis=[1, 2, 3]).numpy(),
    }
    assert np.array_equal(per_example(term("l1")), former["l1"])
    assert np.array_equal(per_example(term("l2")), former["l2"])
    np.testing.assert_allclose(former["l1"], np.abs(HR - SR).mean(axis=(1, 2, 3)), rtol=1e-6)
    np.testing.assert_allclose(former["l2"], ((HR - SR) ** 2).mean(axis=(1, 2, 3)), rtol=1e-5)


@pytest.mark.parametrize("option", ["l1", "l2", "charbonnier"])
def test_each_loss_preset_instantiates_its_term(compose, option):
    loss = hydra.utils.instantiate(compose(f"loss={option}").loss)
    assert type(loss) is Loss and loss.name == option and loss.names == (option,)
    assert compose().loss.terms == {"l1": {}}  # the default: L1 at its schema's defaults


def test_the_default_optimizer_is_todays_adam(compose):
    from sr.train.optimizers import make_optimizer

    for ema, kind in ((None, keras.optimizers.Adam), (0.99, "AveragingAdam")):
        extra = [f"train.ema={ema}"] if ema else []
        opt = make_optimizer(compose(*extra), mixed=False)
        if ema is None:
            assert type(opt) is kind
        else:
            assert type(opt).__name__ == kind and opt.use_ema
        assert (opt.beta_1, opt.beta_2, opt.weight_decay) == (0.9, 0.999, None)


@pytest.mark.slow
def test_adamw_composes_decays_the_weights_and_trains(folders, compose, tmp_path):
    """``optimizer=adamw``: Keras's AdamW with the group's keys; its decoupled decay shrinks a
    weight with zero gradient by ``lr x weight_decay`` a step; and a run trains two steps."""
    from sr.train.app import run
    from sr.train.optimizers import make_optimizer

    cfg = compose(
        "optimizer=adamw",
        "optimizer.weight_decay=0.5",
        "optimizer.beta_1=0.8",
        "train.lr=0.1",
        "train.lr_schedule=constant",
        "train.ema=0.9",
    )
    opt = make_optimizer(cfg, mixed=False)
    assert isinstance(opt, keras.optimizers.AdamW) and opt.use_ema
    assert (opt.beta_1, opt.beta_2, opt.weight_decay) == (0.8, 0.999, 0.5)
    w = keras.Variable(np.ones(4, np.float32))
    opt.build([w])
    opt.apply([np.zeros(4, np.float32)], [w])
    np.testing.assert_allclose(keras.ops.convert_to_numpy(w), 1 - 0.1 * 0.5, rtol=1e-6)

    cfg = compose(
        f"data.hr_dir={folders / 'train'}",
        f"data.val_dir={folders / 'val'}",
        "data=generator",
        "data.batch_size=4",
        "train.steps=2",
        "train.log_every=1",
        "optimizer=adamw",
        "loss=charbonnier",
    )
    final = run(cfg, tmp_path / "run")
    assert final["step"] == 2 and np.isfinite(final["val/psnr"])
    assert (tmp_path / "run" / "checkpoints" / "ckpt-2.index").is_file()
    hparams = recorded_hparams(tmp_path / "run" / "tb")
    assert hparams["loss"] == "charbonnier" and hparams["loss_config"] == (
        "charbonnier(weight=1, target=gt_usm, eps=0.001)"
    )
    assert hparams["optimizer"] == "adamw"
    assert hparams["optimizer_config"] == "adamw(beta_1=0.9, beta_2=0.999, weight_decay=0.004)"


def recorded_hparams(tb) -> dict:
    """The HParams of a run's TensorBoard record (the dashboard's session start info)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    acc = EventAccumulator(str(tb), size_guidance={"tensors": 0})
    acc.Reload()
    content = acc.SummaryMetadata("_hparams_/session_start_info").plugin_data.content
    info = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info
    return {k: v.string_value or v.number_value for k, v in info.hparams.items()}
