"""The checkpoints of a run (``sr.train.saving``), built alone: no config, data source or
trainer, a one-convolution model and a ``tf.train.CheckpointManager`` in ``tmp_path``."""

import numpy as np
import pytest

from sr.train.saving import NonFiniteError
from sr.train.validation import ValidationError
from tests.trainer_parts import build_parts, set_weights, weight


def test_a_save_and_a_resume_give_back_the_weights_step_and_elapsed_time(tmp_path):
    run = build_parts(tmp_path)
    set_weights(run.model, 0.25)
    run.state.step.assign(3)
    run.state.elapsed.assign(42.0)
    run.guard.remember(np.array([1.5, 2.0, 30.0]))
    path = run.checkpoints.save()
    assert path == str(tmp_path / "checkpoints" / "ckpt-3")
    assert run.state.saved_steps == [3]
    set_weights(run.model, 0.5)
    run.state.step.assign(5)
    run.checkpoints.save()

    again = build_parts(tmp_path)  # a new process: fresh weights, step 0
    assert again.checkpoints.resume() == str(tmp_path / "checkpoints" / "ckpt-5")
    assert again.state.at() == 5 and weight(again.model) == 0.5
    assert float(again.state.elapsed.numpy()) == 42.0  # the clock never started: unchanged
    assert sorted(again.state.saved_steps) == [3, 5]
    assert list(again.state.guard.memory.numpy()) == [1.5, 2.0, 30.0]  # the guard's, saved

    again.checkpoints.restore(path, elapsed=False)  # a rollback's: the older checkpoint
    assert again.state.at() == 3 and weight(again.model) == 0.25


def test_a_damaged_newest_checkpoint_is_skipped_for_the_one_before(tmp_path, caplog):
    run = build_parts(tmp_path)
    for step in (2, 4):
        run.state.step.assign(step)
        run.checkpoints.save()
    data = next((tmp_path / "checkpoints").glob("ckpt-4.data-*"))
    data.write_bytes(data.read_bytes()[:10])  # truncated
    again = build_parts(tmp_path)
    assert again.checkpoints.resume().endswith("ckpt-2") and again.state.at() == 2
    assert "ckpt-4.data-00000-of-00001, ckpt-4.index is unreadable" in caplog.text


def test_a_run_without_checkpoints_is_refused_naming_the_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match=f"no checkpoint in {tmp_path / 'checkpoints'}"):
        build_parts(tmp_path).checkpoints.resume()


def test_nothing_non_finite_is_saved(tmp_path):
    run = build_parts(tmp_path)
    run.state.step.assign(2)
    good = run.checkpoints.save()
    set_weights(run.model, np.nan)
    run.state.step.assign(4)
    with pytest.raises(NonFiniteError, match="non-finite weights at step 4") as info:
        run.checkpoints.save()
    assert info.value.last_checkpoint == good and f"resume={tmp_path}" in str(info.value)
    assert run.state.saved_steps == [2]
    assert not list((tmp_path / "checkpoints").glob("ckpt-4*"))

    run.state.first_bad.assign(3)  # the device's record of a NaN loss at step 3
    with pytest.raises(NonFiniteError, match="non-finite loss \\(NaN or inf\\) at step 3"):
        run.finite.check()


def test_the_skip_policy_stops_when_every_step_of_a_window_was_skipped(tmp_path, caplog):
    run = build_parts(tmp_path, skip=True)
    run.state.step.assign(4)
    run.state.skipped.assign(1)
    run.finite.check(window=True)  # 1 of 4: a warning
    assert "skipped 1 step(s) with a non-finite loss or gradient (1 in all)" in caplog.text
    run.state.step.assign(6)
    run.state.skipped.assign(3)
    with pytest.raises(NonFiniteError, match="every one of the last 2 steps"):
        run.finite.check(window=True)


def test_a_failing_validation_saves_the_step_first(tmp_path):
    run = build_parts(tmp_path)
    run.state.step.assign(6)

    def bad_image():
        raise ValueError("val/a.png is 8x8, smaller than 16x16")

    with pytest.raises(ValidationError, match="val/a.png is 8x8") as info:
        run.checkpoints.validate_safely(bad_image, saved=False, val_dir="val")
    assert "saved in " + str(tmp_path / "checkpoints" / "ckpt-6") in str(info.value)
    assert "data.val_dir=val" in str(info.value) and f"resume={tmp_path}" in str(info.value)
    assert run.state.saved_steps == [6]
    assert run.checkpoints.validate_safely(lambda: {"psnr": 30.0}, True, "val") == {"psnr": 30.0}
