"""One rule for what a resume may change: the keys that define a run (sr.train.rundir.RUN_KEYS:
the model and its hyperparameters, data.scale, data.channels, the degradation, the loss, the
optimizer's type) must be the run's; any of them changed is refused before any work, every
differing key named old -> new, with train.init_from=RUN as the way to start from the run's
weights. train.init_from itself: the weights of the run's best checkpoint (its averages where
it has them), a fresh step, optimizer and data position, and a model of another shape refused."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import tensorflow as tf
from omegaconf import OmegaConf

import sr.config
from sr.core.errors import RunDirError
from sr.core.runfiles import RunFileError
from sr.loading.checkpoints import best_dir, make_checkpoint
from sr.loading.models import build_model
from sr.train.app import run
from sr.train.checkpoint import make_manager
from sr.train.init_from import init_from_choice
from sr.train.rundir import RUN_KEYS, check_resume, config_differences
from tests.fake_run import TINY, make_run


@pytest.fixture(scope="module")
def y_run(tmp_path_factory):
    """A fake bicubic Y run of ESPCN [8, 8] with checkpoint ckpt-5 (tests/fake_run.py)."""
    return make_run(sr.config.compose, tmp_path_factory.mktemp("y") / "run", steps=(5,))


def _refused(compose, run_dir, *overrides) -> str:
    base = ("model=espcn",) if "model=edsr_lite" in overrides else TINY  # EDSR: int features
    with pytest.raises(RunDirError) as info:
        check_resume(compose(*base, "data.scale=4", f"resume={run_dir}", *overrides))
    return str(info.value)


@pytest.mark.parametrize(
    "overrides, lines",
    [
        (("data.channels=rgb",), ["data.channels: 'y' -> 'rgb'"]),
        (
            ("degradation=realesrgan",),
            [
                "degradation._target_: 'sr.degradations.Bicubic' -> "
                "'sr.degradations.realesrgan.RealESRGAN'. Resume with the run's values",
            ],
        ),
        (("loss=charbonnier",), ["loss.terms.charbonnier.eps: '<absent>' -> 0.001"]),
        (("loss=charbonnier",), ["loss.terms.l1.weight: 1.0 -> '<absent>'"]),  # by the terms
        (("++loss.terms.l1.weight=2",), ["loss.terms.l1.weight: 1.0 -> 2. Resume"]),
        (
            ("model=edsr_lite",),
            ["model.arch: 'espcn' -> 'edsr'. Resume"],  # another architecture: not its keys
        ),
        (
            ("optimizer=adamw",),
            ["optimizer._target_: 'sr.train.optimizers.Adam' -> 'sr.train.optimizers.AdamW'"],
        ),
        (("model.features=[16,8]",), ["model.features: [8, 8] -> [16, 8]"]),
        (("data.scale=2",), ["data.scale: 4 -> 2"]),
        (
            ("data.channels=rgb", "model.activation=relu"),
            ["data.channels: 'y' -> 'rgb'", "model.activation: 'tanh' -> 'relu'"],
        ),
    ],
)
@pytest.mark.slow
def test_a_resume_changing_a_key_that_defines_the_run_is_refused_naming_each(
    y_run, compose, overrides, lines
):
    message = _refused(compose, y_run, *overrides)
    assert message.startswith(f"resume={y_run}: a resume continues the run as it was defined")
    for line in lines:
        assert line in message, message
    assert f"train.init_from={y_run} (weights only: a fresh step, optimizer" in message


@pytest.mark.parametrize(
    "overrides",
    [
        ("train.lr=0.5", "train.steps=400", "train.max_minutes=3", "train.log_every=7"),
        ("train.val_every=3", "train.guard=false", "data.batch_size=2", "optimizer.beta_1=0.5"),
    ],
)
def test_a_resume_may_change_steps_budgets_lr_and_logging(y_run, compose, overrides):
    check_resume(compose(*TINY, "data.scale=4", f"resume={y_run}", *overrides))


def test_a_run_saved_before_a_key_existed_compares_as_its_default(compose):
    new = compose(*TINY)
    old = OmegaConf.create(OmegaConf.to_container(new))
    for key in ("degradation", "loss", "optimizer"):
        old.pop(key)
    old.data.pop("channels")
    old.discriminator.pop("explode_loss")
    old.discriminator.pop("init_from")
    assert config_differences(old, new) == {}  # Y, bicubic, and no loss or optimizer to compare
    old.model["_target_"] = "sr.models.build_espcn"  # a run saved before the model registry
    old.model.pop("arch")
    assert config_differences(old, new) == {}
    old.model["_target_"] = "sr.models.build_edsr"
    assert config_differences(old, new) == {"model.arch": ("edsr", new.model.arch)}
    assert set(RUN_KEYS) >= {"model", "data.scale", "data.channels", "degradation", "loss"}


def test_the_refusal_comes_before_any_work(y_run, compose, tmp_path):
    """What train.py runs refuses it too (in-process), before the data folder is read."""
    cfg = compose(
        *TINY, f"resume={y_run}", "data=generator", f"data.hr_dir={tmp_path / 'never-read'}",
        "data.val_dir=null", "data.channels=rgb",
    )  # fmt: skip
    with pytest.raises(RunDirError, match="data.channels: 'y' -> 'rgb'"):
        run(cfg, y_run)
    assert not (tmp_path / "never-read").exists()


@pytest.fixture(scope="module")
def averaged_run(y_run, tmp_path_factory):
    """A copy of ``y_run`` with checkpoints/best (ckpt-3) holding weights and their averages,
    ``train.ema``'s ``ema`` part, each a known offset of the rotation's weights."""
    run_dir = tmp_path_factory.mktemp("avg") / "run"
    shutil.copytree(y_run, run_dir)
    cfg = OmegaConf.load(run_dir / ".hydra" / "config.yaml")
    model = build_model(cfg)
    averages = [tf.Variable(v + 0.25) for v in model.trainable_variables]
    for v in model.trainable_variables:
        v.assign(v - 0.5)
    step = tf.Variable(3, dtype=tf.int64)
    manager = make_manager(make_checkpoint(model, step=step, ema=averages), run_dir)
    best = tf.train.CheckpointManager(manager.checkpoint, str(best_dir(run_dir)), max_to_keep=1)
    best.save(checkpoint_number=3)
    return run_dir, [v.numpy() for v in averages]


def test_init_from_starts_from_the_best_averaged_weights_with_a_fresh_step(
    averaged_run, folders, compose, tmp_path, caplog
):
    run_dir, averages = averaged_run
    cfg = compose(
        *TINY, "data=generator", f"data.hr_dir={folders / 'train'}", "data.val_dir=null",
        "data.batch_size=2", "train.steps=1", "train.lr=1e-9", "loss=l2", "optimizer=adamw",
        f"train.init_from={run_dir}",
    )  # fmt: skip
    with caplog.at_level("INFO"):
        final = run(cfg, tmp_path / "new")
    assert final["step"] == 1  # a fresh step: the run's was 5
    assert f"train.init_from={run_dir}: the ema weights of its best (ckpt-3)" in caplog.text
    model, step = build_model(cfg), tf.Variable(0, dtype=tf.int64)
    make_checkpoint(model, step=step).restore(
        tf.train.latest_checkpoint(str(tmp_path / "new" / "checkpoints"))
    ).expect_partial()
    assert int(step) == 1
    for got, want in zip(model.trainable_variables, averages):  # one step of lr 1e-9 from them
        np.testing.assert_allclose(got.numpy(), want, atol=1e-5)


def test_init_from_the_last_checkpoint_of_a_run(averaged_run, folders, compose, tmp_path, caplog):
    """``RUN/checkpoints/last``: the newest checkpoint of the rotation (a finished run's final
    weights, where Real-ESRGAN's GAN stage starts: ``experiment=realesrgan_x4``), not the run's
    best (ckpt-3, averaged)."""
    run_dir, _ = averaged_run
    assert init_from_choice(f"{run_dir}/checkpoints/last") == (run_dir, "last")
    cfg = compose(
        *TINY, "data=generator", f"data.hr_dir={folders / 'train'}", "data.val_dir=null",
        "data.batch_size=2", "train.steps=1", "train.lr=1e-9",
        f"train.init_from={run_dir}/checkpoints/last",
    )  # fmt: skip
    with caplog.at_level("INFO"):
        run(cfg, tmp_path / "new")
    assert "the live weights of its last (ckpt-5)" in caplog.text


def test_init_from_a_run_of_another_model_is_refused_naming_the_keys(y_run, compose, tmp_path):
    cfg = compose(
        "model=espcn", "model.features=[16,8]", "data=generator", "data.channels=rgb",
        f"data.hr_dir={tmp_path / 'never-read'}", "data.val_dir=null",
        f"train.init_from={y_run}",
    )  # fmt: skip
    with pytest.raises(RunDirError) as info:
        run(cfg, tmp_path / "new")
    message = str(info.value)
    assert message.startswith(f"train.init_from={y_run}: its weights do not fit this model (")
    assert "model.features: [8, 8] -> [16, 8]" in message
    assert "data.channels: 'y' -> 'rgb'" in message
    assert not (tmp_path / "new").exists() and not (tmp_path / "never-read").exists()


def test_init_from_a_folder_that_is_not_a_run_is_named(compose, tmp_path):
    cfg = compose(*TINY, "data=generator", f"train.init_from={tmp_path}")
    with pytest.raises(RunDirError, match=f"{tmp_path} is not a run directory of train.py"):
        run(cfg, tmp_path / "new")


def test_a_resume_may_change_where_and_how_the_degradation_runs(compose):
    """degradation.device and degradation.jpeg give the same pairs (tests/test_realesrgan.py): a
    resume may change them; gt_usm changes the pairs and may not."""
    old = compose(*TINY, "degradation=realesrgan")
    on_device = compose(*TINY, "degradation=realesrgan", "degradation.device=accelerator",
                        "degradation.jpeg=tensorflow")  # fmt: skip
    assert config_differences(old, on_device) == {}
    plain = compose(*TINY, "degradation=realesrgan", "degradation.gt_usm=false")
    assert config_differences(old, plain) == {"degradation.gt_usm": (True, False)}


# ------------------------------------------------------------------------------------------------
# train.init_from=RUN/checkpoints/ckpt-N, a damaged best, init_from with resume= (issue 37)
# ------------------------------------------------------------------------------------------------
def test_the_init_from_value_names_a_run_or_one_of_its_checkpoints(tmp_path):
    run_dir = tmp_path / "run"
    assert init_from_choice(run_dir) == (run_dir, None)
    assert init_from_choice(f"{run_dir}/checkpoints/ckpt-40") == (run_dir, "ckpt-40")
    assert init_from_choice(f"{run_dir}/checkpoints/best") == (run_dir, "best")
    assert init_from_choice(f"{run_dir}/checkpoints/") == (run_dir / "checkpoints", None)


def test_init_from_one_checkpoint_of_the_rotation(
    averaged_run, folders, compose, tmp_path, caplog
):
    """``RUN/checkpoints/ckpt-5`` starts from that checkpoint (live weights: it has no
    averages), not from the run's best (ckpt-3, averaged)."""
    run_dir, _ = averaged_run
    chosen = run_dir / "checkpoints" / "ckpt-5"
    cfg = compose(
        *TINY, "data=generator", f"data.hr_dir={folders / 'train'}", "data.val_dir=null",
        "data.batch_size=2", "train.steps=1", "train.lr=1e-9", f"train.init_from={chosen}",
    )  # fmt: skip
    with caplog.at_level("INFO"):
        run(cfg, tmp_path / "new")
    assert f"train.init_from={chosen}: the live weights of its last (ckpt-5)" in caplog.text
    want, got = build_model(cfg), build_model(cfg)
    make_checkpoint(want).restore(str(chosen)).expect_partial()
    make_checkpoint(got).restore(
        tf.train.latest_checkpoint(str(tmp_path / "new" / "checkpoints"))
    ).expect_partial()
    for a, b in zip(got.trainable_variables, want.trainable_variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5)


def test_a_damaged_best_is_refused_before_any_work_naming_the_init_from_of_another(
    averaged_run, compose, tmp_path
):
    run_dir = tmp_path / "run"
    shutil.copytree(averaged_run[0], run_dir)
    data = next((run_dir / "checkpoints" / "best").glob("ckpt-3.data-*"))
    data.write_bytes(data.read_bytes()[:20])
    cfg = compose(*TINY, "data=generator", f"data.hr_dir={tmp_path / 'never-read'}",
                  "data.val_dir=null", f"train.init_from={run_dir}")  # fmt: skip
    with pytest.raises(RunFileError) as info:
        run(cfg, tmp_path / "new")
    message = str(info.value)
    assert f"checkpoint {run_dir}/checkpoints/best/ckpt-3 (" in message
    assert (
        "the best checkpoint is damaged: start from another of its checkpoints with "
        f"train.init_from={run_dir}/checkpoints/ckpt-5"
    ) in message
    assert "--checkpoint" not in message  # the scripts' option, not train.py's
    assert not (tmp_path / "new").exists() and not (tmp_path / "never-read").exists()


def test_init_from_with_resume_is_refused_unless_it_is_the_runs_own_start(
    y_run, compose, tmp_path
):
    """``resume=`` never loads ``train.init_from``: another one is refused naming both; the
    command that started the run, ``resume=`` added, resumes as before."""
    other = tmp_path / "other"
    with pytest.raises(RunDirError) as info:
        check_resume(compose(*TINY, "data.scale=4", f"resume={y_run}", f"train.init_from={other}"))
    message = str(info.value)
    assert message.startswith(f"resume={y_run} with train.init_from={other}: a resume continues")
    assert "never loads train.init_from (the run has none)" in message
    assert "Drop train.init_from to resume the run, or drop resume=" in message
    started = tmp_path / "started"
    shutil.copytree(y_run, started)
    saved = OmegaConf.load(started / ".hydra" / "config.yaml")
    saved.train.init_from = str(other)
    OmegaConf.save(saved, started / ".hydra" / "config.yaml")
    resume = (*TINY, "data.scale=4", f"resume={started}")
    check_resume(compose(*resume, f"train.init_from={other}"))
    with pytest.raises(RunDirError, match=f"the run started from train.init_from={other}"):
        check_resume(compose(*resume, f"train.init_from={y_run}"))
