"""experiment=finetune_realesrgan_x4plus (Real-ESRGAN's finetune_realesrgan_x4plus.yml) and its
CPU variant: the official file's settings, and a run end to end from tiny random-weight files
in the released layouts (a BasicSR RRDBNet generator, a UNetDiscriminatorSN discriminator),
both recorded in the run's init_from.json and both the starting point of the GAN stage."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from sr.core.weightfiles import write_safetensors
from sr.losses import Loss
from sr.models.state_dicts import Found

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "pytorch"
RRDBNET = FIXTURES / "rrdbnet.safetensors"  # BasicSR's RRDBNet: 1 block, 8 features, growth 4


def test_the_official_settings(compose):
    """finetune_realesrgan_x4plus.yml: RRDBNet 23/64/32 RGB x4, U-Net SN discriminator of 64
    features with skips, L1 1 + perceptual 1 + GAN 0.1, Adam 1e-4 (0.9, 0.99) both, constant,
    400k steps, EMA 0.999, 256 HR crops without rot90; the CPU variant: 64 crops, batch 4."""
    cfg = compose("experiment=finetune_realesrgan_x4plus")
    assert dict(cfg.model) == {
        "arch": "rrdbnet", "features": 64, "blocks": 23, "growth": 32,
    }  # fmt: skip
    assert (cfg.data.scale, cfg.data.channels, cfg.data.patch_size) == (4, "rgb", 256)
    assert cfg.data.rot90 is False and cfg.data.batch_size == 12
    d, loss = cfg.discriminator, cfg.loss
    assert (d.features, d.skip_connection, d.lr, d.beta_1, d.beta_2) == (64, True, 1e-4, 0.9, 0.99)
    terms = Loss(loss.terms).terms  # the paper's weights and targets (sr/losses/ defaults)
    assert [(t.name, t.weight, t.usm) for t in terms] == [
        ("l1", 1.0, True), ("perceptual", 1.0, True), ("gan", 0.1, False)
    ]  # fmt: skip
    assert (cfg.optimizer.beta_1, cfg.optimizer.beta_2, cfg.train.lr) == (0.9, 0.99, 1e-4)
    assert (cfg.train.lr_schedule, cfg.train.steps, cfg.train.ema) == ("constant", 400000, 0.999)
    # use_hflip without use_rot, queue_size 180, EMA without warm-up, no guard (issue 35)
    assert (cfg.data.flips, cfg.degradation.pool_size, cfg.degradation.margin) == ("h", 180, 36)
    assert (cfg.train.ema_warmup, cfg.train.guard) == (False, False)
    cpu = compose("experiment=finetune_realesrgan_x4plus_cpu")
    assert (cpu.data.patch_size, cpu.data.batch_size, cpu.train.max_minutes) == (64, 4, 30)
    assert cpu.degradation.margin is None and cpu.degradation.pool_size == 180
    assert dict(cpu.model) == dict(cfg.model) and cpu.discriminator == cfg.discriminator


@pytest.mark.slow
def test_finetune_from_released_layouts_end_to_end(folders, compose, tmp_path):
    unet_sn = pytest.importorskip(
        "sr.models.state_dicts.unet_sn", reason="the unet_sn layout (issue 34) is not here yet"
    )
    from sr.train.app import run

    model = {"_target_": unet_sn.TARGET, "features": 4, "skip_connection": True}
    found = Found("unet_sn", "discriminator", model, 1, 3)
    keras_d = unet_sn.build(found)
    state = unet_sn.dump(keras_d, found)
    rng = np.random.default_rng(0)
    state = {k: (v + rng.normal(0, 0.05, v.shape)).astype(np.float32) for k, v in state.items()}
    net_d = write_safetensors(tmp_path / "netD.safetensors", state, {})
    cfg = compose(
        "experiment=finetune_realesrgan_x4plus_cpu", "model.features=8", "model.blocks=1",
        "model.growth=4", "discriminator.features=4", f"data.hr_dir={folders / 'train'}",
        "data.val_dir=null", "data.patch_size=32", "data.batch_size=2", "train.steps=1",
        "train.max_minutes=null", "train.lr=1e-9", "discriminator.lr=1e-9",
        "++loss.terms.perceptual.vgg_weights=random", f"train.init_from={RRDBNET}",
        f"discriminator.init_from={net_d}",
    )  # fmt: skip
    run(cfg, tmp_path / "run")
    record = json.loads((tmp_path / "run" / "init_from.json").read_text())
    assert record["generator"]["file"] == str(RRDBNET)
    assert record["discriminator"]["file"] == str(net_d)
    assert record["discriminator"]["model"]["features"] == 4
    trained = unet_sn.build(found)
    path = tf.train.latest_checkpoint(str(tmp_path / "run" / "checkpoints"))
    tf.train.Checkpoint(discriminator=trained).restore(path).expect_partial()
    after = unet_sn.dump(trained, found)
    for key, value in state.items():
        if not key.endswith(("weight_u", "weight_v")):  # the power iteration moves those
            np.testing.assert_allclose(after[key], value, atol=1e-5, err_msg=key)


def test_a_discriminator_file_that_does_not_fit_is_refused_before_any_work(compose, tmp_path):
    """discriminator.init_from: a generator file, or a discriminator of other features, named
    with the key and the file's values."""
    unet_sn = pytest.importorskip("sr.models.state_dicts.unet_sn")
    from sr.core.errors import ConfigError
    from sr.train.pretrained import check_discriminator_file

    model = {"_target_": unet_sn.TARGET, "features": 4, "skip_connection": True}
    found = Found("unet_sn", "discriminator", model, 1, 3)
    net_d = write_safetensors(
        tmp_path / "netD.safetensors", unet_sn.dump(unet_sn.build(found), found), {}
    )
    base = ("experiment=finetune_realesrgan_x4plus", "model.blocks=1")
    with pytest.raises(ConfigError, match="discriminator.features: 64 -> 4"):
        check_discriminator_file(compose(*base, f"discriminator.init_from={net_d}"))
    with pytest.raises(ConfigError, match="rrdbnet generator, not a discriminator"):
        check_discriminator_file(compose(*base, f"discriminator.init_from={RRDBNET}"))
    ok = check_discriminator_file(compose(*base, "discriminator.features=4",
                                          f"discriminator.init_from={net_d}"))  # fmt: skip
    assert ok["arch"] == "unet_sn" and ok["model"]["features"] == 4
