"""Nothing lost: a NaN loss stops the run without saving it, a bad validation image is refused at
start-up or reported after the step is saved, and bad ``train`` values are refused at once."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from sr.config import TRAIN_CHOICES, ConfigError
from sr.core.batch import Batch
from sr.core.images import ImageFolderError
from sr.loading.checkpoints import make_checkpoint
from sr.loading.models import build_model
from sr.train.saving import NonFiniteError
from sr.train.validation import ValidationError
from tests.conftest import ROOT, write_photos


def overrides(folders, *extra, val_dir=None, model="espcn"):
    return [
        f"data.hr_dir={folders / 'train'}",
        f"data.val_dir={val_dir or folders / 'val'}",
        "data=generator",
        "data.batch_size=4",
        f"model={model}",  # edsr_lite for NaN: ESPCN's tanh saturates instead of overflowing
        *(["model.blocks=1"] if model == "edsr_lite" else []),  # its blocks: cost, not overflow
        *extra,
    ]


def checkpoint_steps(run_dir) -> list[int]:
    found = (run_dir / "checkpoints").glob("ckpt-*.index")
    return sorted(int(p.name.split("-")[1].split(".")[0]) for p in found)


def assert_all_finite(cfg, run_dir) -> None:
    """Restore every checkpoint left in ``run_dir`` and check each weight is finite."""
    for step in checkpoint_steps(run_dir):
        model = build_model(cfg)
        make_checkpoint(model).restore(
            str(run_dir / "checkpoints" / f"ckpt-{step}")
        ).expect_partial()
        for w in model.weights:
            assert np.isfinite(w.numpy()).all(), (step, w.name)


@pytest.mark.slow
def test_nan_loss_stops_without_saving_and_resume_from_the_last_good_checkpoint(
    folders, tmp_path, compose
):
    from sr.train.app import run

    run_dir = tmp_path / "run"
    common = overrides(
        folders,
        "train.ckpt_every=2",
        "train.val_every=100",
        "train.max_to_keep=2",
        model="edsr_lite",
    )
    run(compose(*common, "train.steps=4"), run_dir)
    assert checkpoint_steps(run_dir) == [2, 4]

    # lr 1e9: step 5's update blows the weights up, so step 6's loss is the first non-finite one
    bad = compose(
        *common, "train.steps=12", "train.lr=1e9", "train.log_every=3", f"resume={run_dir}"
    )
    with pytest.raises(NonFiniteError) as info:
        run(bad, run_dir)
    e = info.value
    assert 5 <= e.step <= 6
    assert e.lr == pytest.approx(1e9, rel=0.5)  # cosine, early in the schedule
    assert e.last_checkpoint == str(run_dir / "checkpoints" / "ckpt-4")
    assert f"at step {e.step} (lr " in str(e) and f"resume={run_dir}" in str(e)
    assert "ckpt-4" in str(e)
    # ckpt-6 (non-finite) was refused, so keep-last-2 did not push out the good ones
    assert checkpoint_steps(run_dir) == [2, 4]
    assert_all_finite(bad, run_dir)

    final = run(compose(*common, "train.steps=6", f"resume={run_dir}"), run_dir)
    assert final["step"] == 6 and np.isfinite(final["val/psnr"])
    assert checkpoint_steps(run_dir) == [4, 6]


def test_nan_found_within_log_every_steps_names_that_step(folders, tmp_path, compose, monkeypatch):
    import sr.train.loop as loop

    calls = []

    def nan_from_step_3(hr, sr):  # traced once: the step number comes from a variable
        calls.append(1)
        loss = tf.reduce_mean(tf.abs(hr - sr), axis=[1, 2, 3])  # per example, as a Loss
        return tf.where(trainer_step[0] >= 2, tf.constant(np.nan, tf.float32), loss)

    class NaNTerm:  # the l1 term, NaN from step 3
        name, weight, usm = "l1", 1.0, True

        def __call__(self, hr, sr):
            return nan_from_step_3(hr, sr)

    trainer_step = []
    original_init = loop.Trainer.__init__

    def init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        trainer_step.append(self.state.step)
        self.stepper.loss.terms = [NaNTerm()]  # read when the step is traced

    monkeypatch.setattr(loop.Trainer, "__init__", init)
    from sr.train.app import run

    cfg = compose(*overrides(folders, "train.steps=20", "train.log_every=4", "train.ckpt_every=2"))
    with pytest.raises(NonFiniteError) as info:
        run(cfg, tmp_path / "run")
    assert info.value.step == 3  # the first NaN step, though the host looked at step 4
    assert "non-finite loss (NaN or inf) at step 3" in str(info.value)
    assert checkpoint_steps(tmp_path / "run") == [2]  # step 4 was not saved
    assert_all_finite(cfg, tmp_path / "run")


@pytest.mark.slow
def test_skip_policy_skips_non_finite_steps_and_counts_them(folders, tmp_path, compose, caplog):
    import logging

    import sr.train.loop as loop
    from sr.train.app import run

    cfg = compose(
        *overrides(folders, "train.steps=6", "train.log_every=3", "train.on_nonfinite=skip")
    )
    from sr.config import build_source

    source = build_source(cfg)
    source.prepare()
    model = build_model(cfg)
    trainer = loop.Trainer(cfg, source, model, tmp_path / "unit")
    lr = tf.random.uniform((4, 24, 24, 1))
    hr = tf.random.uniform((4, 96, 96, 1))
    before = [w.numpy() for w in model.weights]
    iterations = int(trainer.optimizer.iterations)
    nan_hr = tf.fill(hr.shape, np.nan)
    assert np.isnan(float(trainer.train_step(Batch(lq=lr, gt=nan_hr))))
    assert int(trainer.state.skipped) == 1 and int(trainer.state.step) == 1
    assert int(trainer.optimizer.iterations) == iterations  # no update applied
    assert all(np.array_equal(a, w.numpy()) for a, w in zip(before, model.weights))
    trainer.train_step(Batch(lq=lr, gt=hr))
    assert int(trainer.state.skipped) == 1 and int(trainer.optimizer.iterations) == iterations + 1

    # every step of a log window skipped: the model cannot recover, so the run stops
    trainer.finite.check(window=True)  # 1 of 2 skipped: a warning only
    for _ in range(3):
        trainer.train_step(Batch(lq=lr, gt=nan_hr))
    with caplog.at_level(logging.WARNING), pytest.raises(NonFiniteError, match="last 3 steps"):
        trainer.finite.check(window=True)
    assert "skipped 3 step(s) with a non-finite loss or gradient (4 in all)" in caplog.text

    final = run(cfg, tmp_path / "run")  # a normal run under skip trains as usual
    assert final["step"] == 6 and checkpoint_steps(tmp_path / "run") == [6]


def bad_val_dir(tmp_path, kind: str):
    folder = tmp_path / f"val_{kind}"
    write_photos(folder, size=64, names=("chelsea",))
    path = folder / f"bad_{kind}.png"
    if kind == "tiny":
        Image.fromarray(np.zeros((1, 1, 3), np.uint8)).save(path)
    else:
        write_photos(tmp_path / "full", size=64, names=("camera",))
        data = (tmp_path / "full" / "camera_00.png").read_bytes()
        path.write_bytes(data[: len(data) // 2])
    return folder, path


@pytest.mark.parametrize("kind", ["tiny", "truncated"])
def test_bad_validation_image_refused_before_any_model(
    folders, tmp_path, compose, kind, monkeypatch
):
    import sr.train.app as app

    folder, path = bad_val_dir(tmp_path, kind)
    monkeypatch.setattr(app, "build_model", lambda cfg: pytest.fail("model built"))
    cfg = compose(*overrides(folders, "train.steps=2", val_dir=folder))
    with pytest.raises(ImageFolderError) as info:
        app.run(cfg, tmp_path / "run")
    assert path.name in str(info.value)
    if kind == "tiny":
        assert "bad_tiny.png (1x1)" in str(info.value) and "12x12" in str(info.value)
    assert not (tmp_path / "run" / "checkpoints").exists()


@pytest.mark.slow
def test_validation_failure_mid_run_keeps_the_steps_checkpoint(
    folders, tmp_path, compose, monkeypatch
):
    import sr.train.validation
    from sr.train.app import run

    def broken(model, files, scale, keep=0, lr_files=None, with_niqe=False):
        raise ImageFolderError(f"cannot decode image {files[0]}: broken data stream")

    # the trainer validates through sr.train.validation.evaluate_source -> evaluate_images
    monkeypatch.setattr(sr.train.validation, "evaluate_images", broken)
    run_dir = tmp_path / "run"
    # val_every=3 is not a checkpoint step: the failure itself saves step 3
    cfg = compose(*overrides(folders, "train.steps=8", "train.val_every=3", "train.ckpt_every=2"))
    with pytest.raises(ValidationError) as info:
        run(cfg, run_dir)
    msg = str(info.value)
    assert "validation failed at step 3" in msg and "camera_00.png" in msg
    assert str(run_dir / "checkpoints" / "ckpt-3") in msg and f"resume={run_dir}" in msg
    assert checkpoint_steps(run_dir) == [2, 3]

    # same step for both: saved before validating
    run_dir = tmp_path / "run2"
    cfg = compose(*overrides(folders, "train.steps=8", "train.val_every=2", "train.ckpt_every=2"))
    with pytest.raises(ValidationError, match="validation failed at step 2"):
        run(cfg, run_dir)
    assert checkpoint_steps(run_dir) == [2]


BAD_TRAIN = [
    ("lr_schedule", "foo", "one of cosine, step, constant"),
    ("on_nonfinite", "ignore", "one of stop, skip"),
    ("steps", "-5", "integer >= 1"),
    ("steps", "0", "integer >= 1"),
    ("log_every", "0", "integer >= 1"),
    ("val_every", "0", "integer >= 1"),
    ("ckpt_every", "0", "integer >= 1"),
    ("max_to_keep", "0", "integer >= 1"),
    ("lr_decay_steps", "0", "integer >= 1"),
    ("lr_warmup_steps", "-1", "integer >= 0"),
    ("val_images", "-1", "integer >= 0"),
    ("lr", "-1", "number > 0"),
    ("lr", "0", "number > 0"),
    ("lr", "nan", "a finite number"),
    ("max_minutes", "0", "number > 0"),
]


@pytest.mark.slow
@pytest.mark.parametrize("key, value, allowed", BAD_TRAIN)
def test_bad_train_value_refused_before_data_work(
    compose, tmp_path, monkeypatch, key, value, allowed
):
    import sr.train.app as app

    monkeypatch.setattr(app, "build_source", lambda cfg: pytest.fail("data work started"))
    cfg = compose("data=generator", f"train.{key}={value}")
    with pytest.raises(ConfigError, match=rf"^train\.{key} must be") as info:
        app.run(cfg, tmp_path / "run")
    assert allowed in str(info.value)


BAD_GROUP = [
    ("optimizer.beta_1", "1.0", "in [0, 1)", ()),
    ("optimizer.beta_2", "-0.1", "in [0, 1)", ()),
    ("optimizer.weight_decay", "-0.1", "number >= 0", ("optimizer=adamw",)),
    ("loss.terms.charbonnier.eps", "0", "number > 0", ("loss=charbonnier",)),
]


@pytest.mark.parametrize("key, value, allowed, extra", BAD_GROUP)
def test_bad_loss_or_optimizer_value_refused_before_data_work(
    compose, tmp_path, monkeypatch, key, value, allowed, extra
):
    import sr.train.app as app

    monkeypatch.setattr(app, "build_source", lambda cfg: pytest.fail("data work started"))
    cfg = compose("data=generator", *extra, f"++{key}={value}")
    with pytest.raises(ConfigError, match=rf"^{key} must be") as info:
        app.run(cfg, tmp_path / "run")
    assert allowed in str(info.value)


@pytest.mark.slow
def test_every_allowed_choice_is_one_the_trainer_handles(compose):
    """The schema's list of each choice (``TRAIN_CHOICES``) is the one the code runs: every
    ``lr_schedule`` builds its schedule (an unhandled one raises), ``strategy`` is the list
    ``make_strategy`` checks, and every ``loss`` option instantiates a Loss of registered
    terms."""
    import hydra

    from sr.losses import Loss, registry
    from sr.train import distribute
    from sr.train.schedule import lr_at, make_schedule

    lrs = {}
    for value in TRAIN_CHOICES["lr_schedule"]:
        cfg = compose(f"train.lr_schedule={value}", "train.steps=100", "train.lr_decay_steps=10")
        lrs[value] = [lr_at(make_schedule(cfg), s) for s in (0, 50, 100)]
    assert lrs["constant"] == [pytest.approx(1e-3)] * 3
    assert lrs["step"] == [
        pytest.approx(1e-3),
        pytest.approx(1e-3 / 2**5),
        pytest.approx(1e-3 / 2**10),
    ]
    assert lrs["cosine"][0] == pytest.approx(1e-3) and lrs["cosine"][2] == pytest.approx(1e-5)
    assert distribute.STRATEGIES == TRAIN_CHOICES["strategy"]
    with pytest.raises(ConfigError, match=r"must be one of \['auto', 'mirrored'"):
        distribute.make_strategy("nearest")
    options = {p.stem for p in (ROOT / "conf" / "loss").glob("*.yaml")}
    for option in options:
        loss = hydra.utils.instantiate(compose(f"loss={option}").loss)
        assert isinstance(loss, Loss) and set(loss.names) <= set(registry.names())


@pytest.mark.parametrize(
    "override, names",
    [
        ("train.loss=charbonnier", "loss=charbonnier"),
        ("train.beta_1=0.5", "optimizer.beta_1="),
        ("+train.beta_2=0.5", "optimizer.beta_2="),
        ("~train.loss", "loss="),
        ("train.mixed_precision=true", "train.precision=float32|bfloat16|float16"),
    ],
)
def test_a_key_that_moved_is_refused_naming_its_group(override, names):
    from sr.config import check_overrides

    with pytest.raises(ConfigError) as info:
        check_overrides(["data=generator", override])
    assert names in str(info.value) and override.lstrip("+~").split("=")[0] in str(info.value)
    check_overrides(["loss=charbonnier", "optimizer.beta_1=0.5"])  # the new keys pass


@pytest.mark.slow  # a TensorFlow start-up; the check itself runs in process above
def test_train_py_exits_2_on_a_key_that_moved_before_making_a_run_folder(tmp_path):
    """The process: train.py checks the overrides before Hydra starts (one run; the keys above)."""
    override = "train.loss=charbonnier"
    cmd = [sys.executable, str(ROOT / "train.py"), override, f"hydra.run.dir={tmp_path / 'r'}"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "loss=charbonnier" in proc.stderr and "train.loss" in proc.stderr
    assert not (tmp_path / "r").exists()  # refused before Hydra made the run directory


@pytest.mark.slow
def test_train_py_exits_3_on_nan_naming_the_last_good_checkpoint(folders, tmp_path):
    run_dir = tmp_path / "run"
    cmd = [
        sys.executable,
        str(ROOT / "train.py"),
        *overrides(
            folders, "train.steps=8", "train.ckpt_every=2", "train.log_every=2", model="edsr_lite"
        ),
        "train.lr=1e9",
        "train.lr_schedule=constant",
        f"hydra.run.dir={run_dir}",
    ]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 3, out
    assert "non-finite loss (NaN or inf) at step" in out and "(lr 1e+09)" in out
    steps = checkpoint_steps(run_dir)
    if steps:  # a NaN at step 2 leaves none; then the message says to start again
        assert f"the last good checkpoint is {run_dir / 'checkpoints'}/ckpt-{steps[-1]}" in out
        assert f"resume={run_dir}" in out
    else:
        assert "no checkpoint was saved before it" in out
