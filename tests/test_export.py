"""scripts/export.py: the SavedModel's serving signature gives upscale.py's pixels."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from tests.conftest import photo
from tests.fake_run import load_script, make_run

export = load_script("export")
upscale = load_script("upscale")


@pytest.mark.slow
def test_saved_model_gives_the_output_of_upscale(tmp_path, compose, capsys):
    """The command's ``main`` in this process (a script's process: test_plugins.py's, whose
    scripts import a plug-in model again)."""
    run = make_run(compose, tmp_path / "run", steps=(5,))
    saved = tmp_path / "saved"
    assert export.main([str(run), str(saved)]) == 0
    out = capsys.readouterr().out
    assert "step 5, x4" in out and (saved / "saved_model.pb").is_file()

    rgb = np.ascontiguousarray(photo("chelsea")[50:87, 100:145])  # 37x45, odd sizes
    Image.fromarray(rgb).save(tmp_path / "cat.png")
    args = [str(run), str(tmp_path / "cat.png"), str(tmp_path / "cat_x4.png"), "--no-progress"]
    assert upscale.main(args) == 0
    expected = np.asarray(Image.open(tmp_path / "cat_x4.png"))

    loaded = tf.saved_model.load(str(saved))
    serve = loaded.signatures["serving_default"]
    (spec,) = serve.structured_input_signature[1].values()
    assert spec.dtype == tf.uint8 and spec.shape.as_list() == [1, None, None, 3]
    sr = serve(lr=tf.constant(rgb[np.newaxis]))["sr"]
    assert sr.dtype == tf.uint8 and sr.shape == (1, 148, 180, 3)
    np.testing.assert_array_equal(sr[0].numpy(), expected)
    assert int(loaded.scale.numpy()) == 4


@pytest.mark.slow
def test_export_of_a_chosen_checkpoint_differs(tmp_path, compose):
    run = make_run(compose, tmp_path / "run", steps=(3, 8))
    rgb = np.ascontiguousarray(photo("coffee")[100:132, 200:240])
    outputs = {}
    for name in ("ckpt-3", "ckpt-8"):
        record = export.export(run, tmp_path / name, checkpoint=name)
        out, scale, step = tmp_path / name, record["scale"], record["source"]["step"]
        assert (scale, step) == (4, int(name[5:]))
        assert record["check"]["psnr_db"] >= 45  # checked against Keras when written
        serve = tf.saved_model.load(str(out)).signatures["serving_default"]
        outputs[name] = serve(lr=tf.constant(rgb[np.newaxis]))["sr"].numpy()
    assert not np.array_equal(outputs["ckpt-3"], outputs["ckpt-8"])


@pytest.mark.parametrize(
    "target, message",
    [
        ("{tmp}/full", "already exists and is not empty: pick a new folder"),
        ("{tmp}/file.txt", "already exists and is not empty"),
    ],
)
def test_export_refuses_to_overwrite(tmp_path, compose, capsys, target, message):
    run = make_run(compose, tmp_path / "run")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    (tmp_path / "file.txt").write_text("x")
    assert export.main([str(run), target.format(tmp=tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("export.py: error: ") and message in err


def test_export_needs_a_checkpoint(tmp_path, compose, capsys):
    run = make_run(compose, tmp_path / "run")
    for path in (run / "checkpoints").iterdir():
        path.unlink()
    assert export.main([str(run), str(tmp_path / "saved")]) == 2
    assert "no checkpoint in" in capsys.readouterr().err
    assert not (tmp_path / "saved").exists()
