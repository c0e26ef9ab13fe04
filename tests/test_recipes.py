"""The shipped configs: every YAML of conf/model/ and conf/experiment/ composes, builds a model
that upscales any size and that the tiler can bound exactly; the EDSR recipe is the paper's."""

from __future__ import annotations

import copy
import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from sr.inference import Upscaler, receptive_radius
from sr.loading.models import build_model
from sr.models import registry
from sr.models.layers import PixelShuffle
from sr.train.optimizers import make_optimizer
from sr.train.schedule import make_schedule
from tests.conftest import ROOT, photo

# a new YAML is tested by being there
CONFIGS = [f"model={p.stem}" for p in sorted((ROOT / "conf" / "model").glob("*.yaml"))] + [
    f"experiment={p.stem}" for p in sorted((ROOT / "conf" / "experiment").glob("*.yaml"))
]
TILE = 16
# the architectures of issue 45 (transformers, deep CNNs) are checked by their own tests
# (tests/test_<arch>.py: parameters, PyTorch's pixels, upscale.py, the exports): the tiler's
# bound and the three commands below cost minutes on their released presets
OWN_TESTS = ("swinir", "hat", "dat", "omnisr", "rcan", "safmn", "realplksr")
CHECKED = [c for c in CONFIGS if not c.split("=", 1)[1].startswith(OWN_TESTS)]


def non_local(cfg) -> bool:
    """Whether the config's architecture reads the whole image (``ModelSpec.local`` false:
    RLFN's attention pools on a grid anchored at the input's corner, a transformer's windows
    shift): no finite receptive field for the tiler, which falls back to its default overlap;
    their tiles are measured in their own tests (tests/test_efficient_models.py)."""
    return not registry.spec_of(cfg.model).local


# deep models whose receptive field (hundreds of LR pixels: RRDBNet's 23 blocks of 15 convs) makes
# the gradient and tiling checks below cost minutes: those run on a shallower copy, whose field
# the same walk of the same layers bounds
SHALLOW = {
    f"{group}={name}": ("model.blocks=1", "model.growth=8")
    for group, name in (("model", "rrdbnet"), ("experiment", "realesrnet_x4"),
                        ("experiment", "realesrgan_x4"),
                        ("experiment", "finetune_realesrgan_x4plus"),
                        ("experiment", "finetune_realesrgan_x4plus_cpu"))
}  # fmt: skip
# models whose convs start at a small scale (RRDBNet's dense convs: 0.1 x He, as ESRGAN): the
# influence of a pixel 30 convs away underflows float32 to exactly 0, so the gradient check below
# draws their kernels at He scale (the receptive field is the graph's, not the weights')
SMALL_INIT = {"model=rrdbnet", "experiment=realesrnet_x4", "experiment=realesrgan_x4",
              "experiment=cpu20_realesrnet", "experiment=cpu20_realesrgan",
              "experiment=finetune_realesrgan_x4plus",
              "experiment=finetune_realesrgan_x4plus_cpu"}  # fmt: skip


def narrow(cfg):
    """The config's architecture with 8 filters per convolution (and 8 channels of growth for
    dense blocks): widths do not change the receptive field (blocks and kernels do), and the
    checks below run many times faster."""
    cfg = copy.deepcopy(cfg)
    if "features" in cfg.model:
        f = cfg.model.features
        cfg.model.features = 8 if isinstance(f, int) else [8] * len(f)
    if "growth" in cfg.model:
        cfg.model.growth = 8
    return cfg


def same_model_checked_before(override: str) -> str | None:
    """The first config of :data:`CHECKED` before ``override`` whose ``model`` node is the same
    (an experiment that trains a preset as it is, or another experiment's model), or None."""
    import sr.config

    model = sr.config.compose(override).model
    for other in CHECKED[: CHECKED.index(override)]:
        if sr.config.compose(other).model == model:
            return other
    return None


def test_every_config_is_found():
    """CONFIGS (what the tests below run) is every option Hydra offers for ``model=`` and
    ``experiment=`` (its config search path, ConfigStore entries included), not only the YAMLs
    this file's glob happens to see."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        offered = {
            f"{group}={name}"
            for group in ("model", "experiment")
            for name in loader.get_group_options(group)
            if not name.startswith("base_")  # the schemas the options extend (sr.config), which
        }  # train.py refuses as options (sr.config.check_overrides)
    presets = {p.stem for p in (ROOT / "conf" / "model").glob("*.yaml")}
    schemas = {f"model={n}" for n in registry.names() if n not in presets}  # model=<arch>
    assert offered == set(CONFIGS) | schemas
    assert {"model=espcn", "model=edsr_baseline", "model=edsr_lite"} <= offered
    assert set(CLI_MODELS) <= offered
    assert {"experiment=cpu20_hr_sample", "experiment=edsr_baseline_div2k"} <= offered


@pytest.mark.slow
@pytest.mark.parametrize("override", CHECKED)
def test_every_config_builds_a_model_whose_receptive_field_the_tiler_knows(compose, override):
    twin = same_model_checked_before(override)
    if twin is not None:  # the same model node: the same network, checked under that name
        assert compose(override).model == compose(twin).model
        return
    # a deep model: its shallow copy at once. Its full-size network (model=rrdbnet is
    # base_rrdbnet's defaults: 23 blocks, 64 features, growth 32) is built and its radius
    # checked in tests/test_rrdbnet.py::test_structure_is_the_papers
    shallow = override in SHALLOW
    if override == "model=rrdbnet":
        full = compose(override).model
        assert (full.blocks, full.features, full.growth) == (23, 64, 32)
    cfg = compose(override, *SHALLOW[override]) if shallow else compose(override)
    s = cfg.data.scale
    keras.utils.set_random_seed(0)
    model = build_model(cfg)  # the YAML's model (of a deep one: its shallow copy)
    k = int(model.inputs[0].shape[-1])  # 1 (Y) or 3 (data.channels=rgb)
    out = model(np.random.default_rng(0).random((2, 24, 24, k), dtype=np.float32))
    assert tuple(out.shape) == (2, 24 * s, 24 * s, k) and out.dtype == "float32"
    radius = receptive_radius(model)
    if non_local(cfg):
        assert radius is None
        return
    assert radius is not None, f"{override}: the tiler would fall back to a guessed overlap"

    narrow_model = build_model(narrow(cfg))
    assert receptive_radius(narrow_model) == radius

    # the radius is the real field, neither short nor loose: the outputs of the centre LR pixel
    # depend on input pixels exactly ceil(radius) away, and no farther (8-bit rounding hides the
    # outermost taps, so the tiled == untiled check below could not tell an overlap 2 short)
    reach = math.ceil(radius)
    n = 2 * reach + 5
    c = n // 2
    if override in SMALL_INIT:
        rng = np.random.default_rng(2)
        for w in narrow_model.weights:
            if len(w.shape) == 4:
                std = np.sqrt(2 / np.prod(w.shape[:3]))
                w.assign(rng.normal(0, std, w.shape).astype(np.float32))
    x = tf.Variable(np.random.default_rng(1).uniform(size=(1, n, n, k)).astype(np.float32))
    with tf.GradientTape() as tape:
        centre = tf.reduce_sum(narrow_model(x)[0, s * c : s * c + s, s * c : s * c + s])
    grad = np.abs(tape.gradient(centre, x).numpy()[0]).sum(axis=-1)
    assert np.abs(np.argwhere(grad != 0) - c).max() == reach

    # and it is enough: tiles read with that overlap give the untiled image (the crop is larger
    # than a tile and its overlap, so that the first tiles do not see the whole image)
    upscaler = Upscaler(narrow_model, s)
    assert upscaler.overlap == reach + 2  # + the reach of the bicubic upscaling of chroma
    h, w = max(40, TILE + upscaler.overlap + 8), max(52, TILE + upscaler.overlap + 20)
    image = np.ascontiguousarray(photo("astronaut")[100 : 100 + h, 120 : 120 + w])
    whole = upscaler(image)
    tiled = upscaler(image, tile=TILE)
    assert tiled.shape == whole.shape == (s * h, s * w, 3)
    assert whole.std() > 10  # a real image, not a flat one
    assert np.abs(tiled.astype(int) - whole).max() <= 1  # float ties rounded either way
    assert np.mean(tiled == whole) > 0.999


def conv_params(k: int, c_in: int, c_out: int) -> int:
    return k * k * c_in * c_out + c_out


def edsr_baseline_params(channels: int, features: int = 64, blocks: int = 16) -> int:
    """EDSR baseline x4 (Lim et al., CVPRW 2017, Fig. 3): head conv, residual blocks of two
    convs, the body's last conv, two x2 stages (conv to 4 features + shuffle), tail conv."""
    f = features
    return (
        conv_params(3, channels, f)
        + blocks * 2 * conv_params(3, f, f)
        + conv_params(3, f, f)
        + 2 * conv_params(3, f, 4 * f)
        + conv_params(3, f, channels)
    )


def test_edsr_baseline_div2k_is_the_papers_recipe(compose):
    cfg = compose("experiment=edsr_baseline_div2k")

    # the architecture: EDSR baseline on Y (the paper's RGB model: 1.5 M parameters)
    model = build_model(cfg)
    assert model.count_params() == edsr_baseline_params(1) == 1_515_265
    assert 1.5e6 < edsr_baseline_params(3) < 1.52e6
    layers = model._flatten_layers(include_self=False, recursive=True)
    kinds = [type(layer).__name__ for layer in layers]
    assert kinds.count("Conv2D") == 1 + 2 * 16 + 1 + 2 + 1
    assert [la.factor for la in model.layers if isinstance(la, PixelShuffle)] == [2, 2]
    assert "UpSampling2D" not in kinds  # no bicubic skip
    rescalings = [(la.scale, la.offset) for la in model.layers if type(la).__name__ == "Rescaling"]
    assert rescalings == [(1.0, -0.5), (1.0, 0.5)]  # the mean shift only: residual scaling 1

    # the data it asks for (not instantiated: only the keys of the recipe)
    d = cfg.data
    assert (d.scale, d.batch_size, d.patch_size, d.patch_size // d.scale) == (4, 16, 192, 48)
    assert d.flips == "hv" and d.rot90
    assert d.hr_dir.endswith("data/DIV2K/DIV2K_train_HR")
    assert d.val_dir.endswith("data/DIV2K/DIV2K_valid_HR")

    # the optimisation: L1, Adam (0.9, 0.999), 1e-4 halved every 200k steps, 300k steps
    t = cfg.train
    assert (t.steps, dict(cfg.loss.terms)) == (300_000, {"l1": {}})
    optimizer = make_optimizer(cfg, mixed=False)
    assert type(optimizer) is keras.optimizers.Adam  # not AdamW, no averaging
    assert (optimizer.beta_1, optimizer.beta_2) == (0.9, 0.999)
    schedule = make_schedule(cfg)
    for step, lr in [(0, 1e-4), (199_999, 1e-4), (200_000, 5e-5), (299_999, 5e-5)]:
        assert float(schedule(step)) == pytest.approx(lr, rel=1e-6), step


@pytest.mark.parametrize("stage", ["realesrnet_x4", "realesrgan_x4"])
def test_the_real_esrgan_recipes_set_the_papers_data_and_training_choices(compose, stage):
    """Real-ESRGAN's option files: hflip only, no rotation, EMA 0.999 without a warm-up, no
    divergence guard; the patch degraded with a margin past the filters' reach (USM's 25 + the
    blur's 10); stage one from ESRGAN x4's released weights, stage two from the Real-ESRNet
    run's final averaged weights (not its best)."""
    cfg = compose(f"experiment={stage}")
    d, t = cfg.data, cfg.train
    assert (d.flips, d.rot90, d.channels, d.patch_size, d.batch_size) == (
        "h",
        False,
        "rgb",
        256,
        48,
    )
    assert cfg.degradation.margin == 36 and cfg.degradation.margin % d.scale == 0
    assert cfg.degradation.pool_size == 180 >= d.batch_size  # queue_size
    assert (t.ema, t.ema_warmup, t.guard) == (0.999, False, False)
    if stage == "realesrnet_x4":
        assert t.init_from.endswith("/weights/ESRGAN_SRx4_DF2KOST_official-ff704c30.pth")
    else:
        assert t.init_from == "outputs/realesrnet_x4/checkpoints/last"  # its final weights


# the commands are the same for every registered model (sr.loading builds it by name): they run
# here on one model per input kind (one LR frame, several frames) and on a residual one (EDSR-lite
# at 2 of its 8 blocks: the commands do not depend on the depth); RLFN,
# SPAN and RRDBNet go through evaluate.py and upscale.py after training in
# tests/test_efficient_models.py, a plug-in model in tests/test_plugins.py, the architectures of
# OWN_TESTS in their own tests, and every model's tiles above
CLI_MODELS = ["model=espcn", "model=espcn_mf", "model=edsr_lite"]


@pytest.mark.slow
@pytest.mark.parametrize("override", CLI_MODELS)
def test_every_model_evaluates_upscales_and_exports(compose, tmp_path, photo_dir, override):
    """A model's run goes through the three CLIs: evaluate.py, upscale.py (tiled = untiled)
    and export.py (the SavedModel gives upscale.py's pixels)."""
    import json

    from PIL import Image

    from tests.fake_run import load_script, make_run

    espcn = override.startswith("model=espcn")
    width = ("model.features=[8,8]",) if espcn else ("model.features=8", "model.blocks=2")
    small = (override, *width, *SHALLOW.get(override, ()))
    run = make_run(compose, tmp_path / "run", overrides=small)
    evaluate, upscale, export = (load_script(n) for n in ("evaluate", "upscale", "export"))

    assert evaluate.main([str(run), str(photo_dir), "--no-progress"]) == 0
    entry = json.loads((run / "results.json").read_text())["hr"]
    assert entry["n"] == 7 and np.isfinite(entry["psnr"]) and np.isfinite(entry["ssim"])

    src = photo_dir / "astronaut_00.png"  # RGB, 160x168: 4 x 4 tiles of 48 pixels
    for tile in ("48", "0"):
        argv = [str(run), str(src), str(tmp_path / f"up{tile}.png"), "--tile", tile]
        assert upscale.main([*argv, "--no-progress"]) == 0
    tiled, whole = (np.asarray(Image.open(tmp_path / f"up{t}.png")) for t in ("48", "0"))
    assert whole.shape == (4 * 160, 4 * 168, 3)
    equal = 0.99 if non_local(compose(override)) else 0.999  # pooled attention: close, not exact
    assert np.abs(tiled.astype(int) - whole).max() <= 1 and np.mean(tiled == whole) > equal

    assert export.main([str(run), str(tmp_path / "saved")]) == 0
    served = tf.saved_model.load(str(tmp_path / "saved")).signatures["serving_default"]
    rgb = np.asarray(Image.open(src).convert("RGB"))
    out = served(lr=tf.constant(rgb[np.newaxis]))["sr"][0].numpy()
    assert np.abs(out.astype(int) - whole).max() <= 1 and np.mean(out == whole) > 0.999
