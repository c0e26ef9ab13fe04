"""A GAN stage that starts a random discriminator against a generator that may be GAN-trained
says so when the run starts (issue 46): ``train.init_from`` a weights file (the released
RealESRGAN_x4plus.pth) or a GAN run, without ``discriminator.init_from``
(``sr.train.parts.warn_fresh_discriminator``); an L1 run (Real-ESRGAN's stage 2 starts from
one), a given discriminator or a resume do not warn."""

from __future__ import annotations

import logging

from omegaconf import OmegaConf

from sr.train.parts import warn_fresh_discriminator


def compose(*overrides):
    """The keys it reads, as the composed config holds them (``conf/discriminator/unet_sn``)."""
    cfg = OmegaConf.create({"train": {"init_from": None}, "resume": None, "discriminator": None})
    if "d" in overrides:
        cfg.discriminator = {"_target_": "sr.models.unet_sn.build", "init_from": None}
    for item in overrides[1:]:
        key, value = item.split("=", 1)
        OmegaConf.update(cfg, key, value)
    return cfg


GAN = ("d",)


def run_dir(tmp_path, name, cfg):
    (tmp_path / name / ".hydra").mkdir(parents=True)
    (tmp_path / name / "checkpoints").mkdir()
    OmegaConf.save(cfg, tmp_path / name / ".hydra" / "config.yaml")
    return tmp_path / name


def test_a_fresh_discriminator_against_a_trained_generator_is_named(tmp_path, caplog):
    caplog.set_level(logging.WARNING, "sr.train.loop")
    gan_run = run_dir(tmp_path, "gan", compose(*GAN))
    l1_run = run_dir(tmp_path, "l1", compose("l1"))
    pth = tmp_path / "RealESRGAN_x4plus.pth"
    for init in (pth, gan_run, gan_run / "checkpoints" / "ckpt-8"):
        caplog.clear()
        assert warn_fresh_discriminator(compose(*GAN, f"train.init_from={init}"))
        assert f"train.init_from={init} with a discriminator of random weights" in caplog.text
        assert "discriminator.init_from=RealESRGAN_x4plus_netD.pth" in caplog.text
    quiet = [
        compose(*GAN),  # random weights: the other warning says so
        compose(*GAN, f"train.init_from={l1_run}"),  # the official stage 2
        compose(*GAN, f"train.init_from={l1_run}/checkpoints/ckpt-8"),
        compose(*GAN, f"train.init_from={pth}", f"discriminator.init_from={pth}"),
        compose(*GAN, f"train.init_from={pth}", f"resume={gan_run}"),
    ]
    caplog.clear()
    assert not any(warn_fresh_discriminator(cfg) for cfg in quiet)
    assert "random weights" not in caplog.text
