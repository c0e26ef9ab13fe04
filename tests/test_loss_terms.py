"""The loss terms composed in the config (``sr.losses``): the registry and its refusals, the
presets that only differ from the schemas, the one rule of the adversarial part, old run
folders' ``loss`` node read in today's form, the GAN formulations against their formulas
(BasicSR's ``GANLoss``) and the FFT term against traiNNer-redux's ``FFLoss`` (written out in
PyTorch here, from ``traiNNer/losses/focal_frequency_loss.py``)."""

from __future__ import annotations

import dataclasses
import importlib.util
import subprocess
import sys

import numpy as np
import pytest
from omegaconf import OmegaConf

from sr.config import ConfigError, check_adversary, load
from sr.losses import Loss, registry
from sr.losses.legacy import comparable, terms_of_old_loss, upgrade
from sr.train.rundir import config_differences
from tests.conftest import ROOT

RNG = np.random.default_rng(5)


def test_every_term_is_registered_with_a_schema_and_an_unknown_one_is_refused_naming_them():
    assert registry.names() == ["charbonnier", "fft", "gan", "l1", "l2", "perceptual"]
    with pytest.raises(ConfigError, match="no loss term is named 'l3'; the terms are charbonnier, "
                       "fft, gan, l1, l2, perceptual"):  # fmt: skip
        load("+loss.terms.l3.weight=1")
    with pytest.raises(ConfigError, match=r"loss.terms.l1.eps is not a key of the l1 term"):
        load("+loss.terms.l1.eps=1")
    with pytest.raises(ConfigError, match="loss.terms.fft.alpha must be a number >= 0, got -1"):
        load("+loss.terms.fft.alpha=-1")
    with pytest.raises(ConfigError, match="add it with \\+loss.terms.l1.weight=VALUE"):
        load("loss.terms.l1.weight=2")  # a key the preset leaves at its default
    with pytest.raises(ConfigError, match="loss.terms is empty"):
        load("~loss.terms.l1")
    with pytest.raises(ConfigError, match="loss.gan_weight is no longer a key.*loss.terms.gan"):
        load("loss.gan_weight=0")


def test_train_py_refuses_an_unknown_term_with_exit_code_2():
    proc = subprocess.run(
        [sys.executable, "train.py", "+loss.terms.ffft.weight=0.05"], cwd=ROOT,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "no loss term is named 'ffft'; the terms are charbonnier, fft, gan" in proc.stderr


@pytest.mark.parametrize("preset", ["l1", "l2", "charbonnier", "realesrgan"])
def test_a_preset_writes_only_what_differs_from_the_schemas(compose, preset):
    terms = OmegaConf.to_container(compose(f"loss={preset}").loss.terms)
    for name, keys in terms.items():
        defaults = dataclasses.asdict(registry.get(name).schema())
        assert all(defaults[k] != v for k, v in keys.items()), (preset, name, keys)


@pytest.mark.slow
def test_a_term_is_added_on_the_command_line_with_its_defaults(compose):
    loss = Loss(load("loss=charbonnier", "+loss.terms.fft.weight=0.05").loss.terms)
    assert loss.names == ("charbonnier", "fft") and loss.name == "charbonnier+fft"
    fft = loss.terms[1]
    assert (fft.weight, fft.usm, fft.alpha, fft.patch, fft.ave_spectrum) == (
        0.05,
        True,
        1,
        1,
        True,
    )
    assert loss.adversarial is None and not loss.feature


@pytest.mark.parametrize(
    "overrides, message",
    [
        (("loss=realesrgan",), "loss.terms.gan is a GAN term and needs a discriminator"),
        (("discriminator=unet_sn",), "discriminator=unet_sn trains a GAN and needs a GAN term"),
        (("discriminator=unet_sn", "loss=realesrgan", "~loss.terms.gan"), "needs a GAN term"),
    ],
)
def test_a_gan_term_and_a_discriminator_come_together(compose, overrides, message):
    with pytest.raises(ConfigError, match=message):
        check_adversary(compose(*overrides))
    with pytest.raises(ConfigError, match=message):
        load(*overrides)


def test_the_gan_term_with_a_discriminator_and_l1_plus_perceptual_without_compose(compose):
    check_adversary(compose("loss=realesrgan", "discriminator=unet_sn"))
    check_adversary(
        compose("loss=l1", "+loss.terms.gan.formulation=hinge", "discriminator=unet_sn")
    )
    check_adversary(compose("loss=realesrgan", "~loss.terms.gan"))


OLD_REALESRGAN = {
    "_target_": "sr.train.gan_loss.RealESRGANLoss", "l1_weight": 1.0, "perceptual_weight": 1.0,
    "vgg_weights": "imagenet", "vgg_layer_weights": [0.1, 0.1, 1.0, 1.0, 1.0],
    "gan_weight": 0.1, "l1_gt_usm": True, "percep_gt_usm": True, "gan_gt_usm": False,
}  # fmt: skip


def test_an_old_loss_node_is_read_as_its_terms():
    assert terms_of_old_loss({"_target_": "sr.train.losses.L1"}, False) == {"l1": {}}
    old = {"_target_": "sr.train.losses.Charbonnier", "eps": 0.01}
    assert terms_of_old_loss(old, False) == {"charbonnier": {"eps": 0.01}}
    terms = terms_of_old_loss(OLD_REALESRGAN, True)
    assert list(terms) == ["l1", "perceptual", "gan"]
    assert terms["gan"] == {"weight": 0.1, "target": "gt", "formulation": "vanilla"}
    assert terms["perceptual"]["layer_weights"] == [0.1, 0.1, 1.0, 1.0, 1.0]
    no_vgg = terms_of_old_loss({**OLD_REALESRGAN, "perceptual_weight": 0, "gan_weight": 0}, False)
    assert list(no_vgg) == ["l1"]  # L1 + perceptual at weight 0: no VGG was built, no GAN
    assert terms_of_old_loss({"_target_": "sr.losses.Loss", "terms": {}}, False) is None


@pytest.mark.parametrize(
    "old, overrides",
    [
        ({"_target_": "sr.train.losses.L1"}, ()),
        ({"_target_": "sr.train.losses.Charbonnier", "eps": 0.01},
         ("loss=charbonnier", "+loss.terms.charbonnier.eps=0.01")),
        (OLD_REALESRGAN, ("loss=realesrgan", "discriminator=unet_sn")),
        ({**OLD_REALESRGAN, "gan_weight": 0}, ("loss=realesrgan", "~loss.terms.gan")),
    ],
)  # fmt: skip
def test_a_run_saved_with_the_old_loss_resumes_under_todays_preset(compose, old, overrides):
    """What ``resume=`` compares (``sr.train.rundir.check_resume``): the saved config, upgraded
    and with every key of each term, against today's command line: no difference; another
    preset: the differing terms named."""
    new = compose(*overrides)
    saved = OmegaConf.create(OmegaConf.to_container(new))
    saved.loss = old
    assert (
        upgrade(OmegaConf.create(OmegaConf.to_container(saved))).loss._target_ == "sr.losses.Loss"
    )
    assert config_differences(comparable(saved), comparable(new)) == {}
    other = comparable(compose("loss=l2"))
    assert any(k.startswith("loss.terms.") for k in config_differences(comparable(saved), other))


def _gan_numpy(formulation, real, fake):
    """BasicSR's ``GANLoss`` by its formulas (float64), per example: generator, D real, D fake."""

    def mean(x):
        return x.reshape(len(x), -1).mean(axis=1)

    if formulation == "vanilla":

        def bce(x, label):
            return np.maximum(x, 0) - x * label + np.log1p(np.exp(-np.abs(x)))

        return mean(bce(fake, 1)), mean(bce(real, 1)), mean(bce(fake, 0))
    if formulation == "lsgan":
        return mean((fake - 1) ** 2), mean((real - 1) ** 2), mean(fake**2)
    return -mean(fake), mean(np.maximum(1 - real, 0)), mean(np.maximum(1 + fake, 0))


@pytest.mark.parametrize("formulation", ["vanilla", "lsgan", "hinge"])
def test_each_gan_formulation_is_basicsrs(formulation):
    real = (RNG.normal(size=(2, 8, 8, 1)) * 2).astype(np.float32)
    fake = (RNG.normal(size=(2, 8, 8, 1)) * 2).astype(np.float32)
    gan = Loss({"gan": {"formulation": formulation}}).adversarial
    g, d_real, d_fake = _gan_numpy(formulation, real.astype(np.float64), fake.astype(np.float64))
    np.testing.assert_allclose(gan.generator(fake).numpy(), g, rtol=1e-5, atol=1e-6)
    got_real, got_fake = gan.discriminator(real, fake)
    np.testing.assert_allclose(got_real.numpy(), d_real, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_fake.numpy(), d_fake, rtol=1e-5, atol=1e-6)
    zero = np.zeros((1, 4, 4, 1), np.float32)  # balance: D = 0 (lsgan's is D = 0.5)
    at = zero + (0.5 if formulation == "lsgan" else 0.0)
    balance = sum(float(t.numpy()[0]) for t in gan.discriminator(at, at))
    assert balance == pytest.approx(gan.balance, rel=1e-6)


def _ffloss_torch(pred, target, alpha, patch_factor, ave_spectrum, log_matrix, batch_matrix):
    """traiNNer-redux's ``FFLoss.forward`` (``traiNNer/losses/focal_frequency_loss.py``), its
    arithmetic written out, on NCHW tensors: the oracle of the FFT term."""
    import torch

    def tensor2freq(x):
        _, _, h, w = x.shape
        ph, pw = h // patch_factor, w // patch_factor
        patches = [x[:, :, i * ph:(i + 1) * ph, j * pw:(j + 1) * pw]
                   for i in range(patch_factor) for j in range(patch_factor)]  # fmt: skip
        freq = torch.fft.fft2(torch.stack(patches, 1), norm="ortho")
        return torch.stack([freq.real, freq.imag], -1)

    recon, real = tensor2freq(pred), tensor2freq(target)
    if ave_spectrum:
        recon, real = recon.mean(0, keepdim=True), real.mean(0, keepdim=True)
    m = (recon - real) ** 2
    m = torch.sqrt(m[..., 0] + m[..., 1]) ** alpha
    if log_matrix:
        m = torch.log(m + 1.0)
    if batch_matrix:
        m = m / m.max()
    else:
        m = m / m.max(-1).values.max(-1).values[:, :, :, None, None]
    m[torch.isnan(m)] = 0.0
    weight = torch.clamp(m, min=0.0, max=1.0).detach()
    tmp = (recon - real) ** 2
    return 50 * torch.mean(weight * (tmp[..., 0] + tmp[..., 1]))


FFT_CASES = [
    {},
    {"ave_spectrum": False},
    {"ave_spectrum": False, "patch_factor": 2, "alpha": 2.0},
    {"log_matrix": True, "batch_matrix": True, "alpha": 0.5},
]


@pytest.mark.torch
@pytest.mark.parametrize("keys", FFT_CASES)
def test_the_fft_term_is_trainner_redux_ffloss(keys):
    if importlib.util.find_spec("torch") is None:
        pytest.skip("needs torch")
    import torch

    hr = RNG.random((3, 16, 12, 3)).astype(np.float32)
    sr = np.clip(hr + RNG.normal(0, 0.1, hr.shape), 0, 1).astype(np.float32)
    term = Loss({"fft": keys}).terms[0]
    got = term(hr, sr).numpy()
    settings = dataclasses.asdict(term.settings)
    settings = {k: v for k, v in settings.items() if k not in ("weight", "target")}
    nchw = lambda x: torch.from_numpy(x.transpose(0, 3, 1, 2).copy())  # noqa: E731
    want = _ffloss_torch(nchw(sr), nchw(hr), **settings).item()
    assert got.shape == (3,)
    assert float(got.mean()) == pytest.approx(want, rel=1e-5)  # the batch mean: traiNNer's value


def test_the_fft_term_is_zero_for_a_perfect_sr_and_grows_with_the_error():
    hr = RNG.random((2, 8, 8, 1)).astype(np.float32)
    term = Loss({"fft": {"ave_spectrum": False}}).terms[0]
    np.testing.assert_array_equal(term(hr, hr).numpy(), 0.0)  # 0/0 weights set to 0
    small, large = (term(hr, np.clip(hr + e, 0, 1)).numpy() for e in (0.01, 0.1))
    assert (large > small).all() and (small > 0).all()
