"""The one reader of the files runs write and read back (sr/core/runfiles.py): each kind,
truncated or corrupt in turn, is one clear error naming the file and the fix (exit code 2 from
the commands), or its documented fallback with a warning."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
import tensorflow as tf
from omegaconf import open_dict

from sr.core.runfiles import (
    RunFileError,
    check_checkpoint,
    checkpoint_state,
    read_json,
    restore_checkpoint,
)
from sr.data.tfrecord.manifest import read_manifest, stale_reason
from sr.loading.checkpoints import best_dir, make_checkpoint, read_best, resume_candidates
from sr.loading.models import build_model, load_model_from_run
from sr.train.rundir import check_resume
from tests.fake_run import TINY, load_script, make_run

evaluate = load_script("evaluate")
DATA = "data-00000-of-00001"


@pytest.fixture
def run(tmp_path, compose) -> Path:
    """A fake run: rotation ckpt-4 and ckpt-8, ``checkpoints/best/ckpt-8`` with ``best.json``."""
    run = make_run(compose, tmp_path / "run", steps=(4, 8))
    model = build_model(compose(*TINY, "data.scale=4"))
    step = tf.Variable(8, dtype=tf.int64)
    manager = tf.train.CheckpointManager(
        make_checkpoint(model, step=step), str(best_dir(run)), max_to_keep=1
    )
    prefix = manager.save(checkpoint_number=8)
    record = {"step": 8, "psnr": 25.0, "weights": "live", "checkpoint": Path(prefix).name}
    (best_dir(run) / "best.json").write_text(json.dumps(record))
    return run


def truncate(path: Path, keep: float = 0.5) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def test_a_truncated_best_checkpoint_names_it_and_checkpoint_last(run, tmp_path, capsys):
    """The issue's case: evaluate.py on a run whose checkpoints/best data file is truncated
    (TensorFlow: IndexError, Read less bytes than requested)."""
    truncate(best_dir(run) / f"ckpt-8.{DATA}")
    (tmp_path / "hr").mkdir()
    assert evaluate.main([str(run), str(tmp_path / "hr")]) == 2
    err = capsys.readouterr().err
    assert f"checkpoint {best_dir(run) / 'ckpt-8'} (ckpt-8.{DATA}, ckpt-8.index)" in err
    assert "is unreadable (IndexError: Read less bytes than requested)" in err
    assert "--checkpoint last" in err and "ckpt-4, ckpt-8" in err
    model, _, step = load_model_from_run(run, "last")  # the fix works
    assert step == 8


DAMAGES = {  # what is done to ckpt-4 -> what TensorFlow says, quoted in the error
    "empty data": (lambda p: truncate(Path(f"{p}.{DATA}"), 0.0), "IndexError"),
    "flipped byte": (lambda p: flip(Path(f"{p}.{DATA}")), "Checksum does not match"),
    "truncated index": (lambda p: truncate(Path(f"{p}.index")), "not an sstable"),
    "no data file": (lambda p: Path(f"{p}.{DATA}").unlink(), "No such file"),
}


def test_a_damaged_rotation_checkpoint_names_the_others(run, tmp_path):
    prefix = run / "checkpoints" / "ckpt-4"
    for name in (f"ckpt-4.{DATA}", "ckpt-4.index"):
        shutil.copy(prefix.parent / name, tmp_path / name)
    for what, (damage, problem) in DAMAGES.items():
        damage(prefix)
        with pytest.raises(RunFileError, match=problem) as e:
            load_model_from_run(run, "ckpt-4")
        assert str(e.value).startswith(f"checkpoint {prefix} (ckpt-4."), what
        assert "choose another checkpoint: --checkpoint best, last or ckpt-N (ckpt-8)" in str(
            e.value
        )
        for name in (f"ckpt-4.{DATA}", "ckpt-4.index"):
            shutil.copy(tmp_path / name, prefix.parent / name)
        assert load_model_from_run(run, "ckpt-4")[2] == 4  # whole again
    check_checkpoint(run / "checkpoints" / "ckpt-8", "unused")  # the others were never touched


def test_a_checkpoint_of_another_model_is_not_called_damaged(run, compose):
    """The file is whole: a restore into another model fails as TensorFlow says, never as a
    damaged file (a resume under a changed config is refused by its own rule)."""
    other = build_model(compose("model=espcn", "model.features=[4,4]", "data.scale=4"))
    with pytest.raises((AssertionError, ValueError)) as e:
        restore_checkpoint(make_checkpoint(other), run / "checkpoints" / "ckpt-8", "unused")
    assert not isinstance(e.value, RunFileError)


def test_a_damaged_state_file_falls_back_to_the_checkpoint_files(run, caplog):
    """``checkpoints/checkpoint`` truncated: TensorFlow alone would see no checkpoint at all;
    the files of the folder stand in for it, with a warning naming it."""
    state = run / "checkpoints" / "checkpoint"
    state.write_text(state.read_text()[:45])  # cut inside all_model_checkpoint_paths: "...
    with caplog.at_level(logging.WARNING, "sr.core.runfiles"):
        latest, paths = checkpoint_state(run / "checkpoints")
    assert Path(latest).name == "ckpt-8" and [Path(p).name for p in paths] == ["ckpt-4", "ckpt-8"]
    assert f"{run / 'checkpoints' / 'checkpoint'} is unreadable" in caplog.text
    assert [Path(p).name for p in resume_candidates(run / "checkpoints")] == ["ckpt-8", "ckpt-4"]
    assert load_model_from_run(run, "last")[2] == 8


BAD_JSON = {  # best.json's text -> the problem named
    "truncated": ('{"step": 8, "psnr": 2', "JSONDecodeError"),
    "empty": ("", "JSONDecodeError"),
    "a list": ("[1, 2]", "a JSON list, not an object"),
    "keys missing": ('{"step": 8}', "it lacks psnr, checkpoint"),
    "not UTF-8": (b"\xff\xfe{", "UnicodeDecodeError"),
}


def test_a_malformed_best_json_refuses_the_resume_before_any_work(run, compose):
    """The issue's case: a resume whose best.json is malformed (a raw JSONDecodeError before)
    is refused by the run-directory check (train.py: exit 2, nothing written)."""
    path = best_dir(run) / "best.json"
    cfg = compose(*TINY, "data.scale=4")
    with open_dict(cfg):
        cfg.resume = str(run)
    for what, (text, problem) in BAD_JSON.items():
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        with pytest.raises(RunFileError, match=problem) as e:
            check_resume(cfg)
        assert e.value.path == path, what
        assert f"mv {best_dir(run)} {best_dir(run)}.damaged" in str(e.value)
        with pytest.raises(RunFileError):
            read_best(run)
    shutil.move(best_dir(run), f"{best_dir(run)}.damaged")  # the fix
    check_resume(cfg)


def test_a_damaged_manifest_makes_the_set_stale(tmp_path):
    """The shard manifest's documented fallback: unreadable means stale, the set is rebuilt."""
    (tmp_path / "manifest.json").write_text('{"format": 3, "records": ')
    assert read_manifest(tmp_path) is None
    with pytest.raises(RunFileError, match="manifest.json is unreadable .JSONDecodeError"):
        read_json(tmp_path / "manifest.json", "the set is rebuilt")
    reason = stale_reason(None, tmp_path, images=None, params=None)
    assert reason.startswith(f"manifest.json of {tmp_path} is unreadable")
