"""Sequences at evaluation and inference: ``sr.evaluation.evaluate_sequences`` (windows with
border frames repeated, every frame scored once, means over sequences), ``scripts/evaluate.py`` on
folders of sequences, ``scripts/upscale.py`` of a multi-frame run, and export's refusal."""

from __future__ import annotations

import csv
import json

import keras
import numpy as np
import pytest
import tensorflow as tf
from omegaconf import OmegaConf
from PIL import Image

from sr import evaluation
from sr import results as sr_results
from sr.core.color import y_channel
from sr.core.degrade import bicubic_upscale
from sr.core.frames import list_sequences, window_frames
from sr.core.images import ImageFolderError, load_image
from sr.evaluation import evaluate_images, evaluate_sequences, prepare
from sr.inference import SequenceUpscaler, read_image, receptive_radius
from sr.loading.checkpoints import make_checkpoint
from sr.loading.models import build_model, load_model_from_run
from sr.models.registry import make_model
from sr.train.checkpoint import make_manager
from tests.conftest import photo
from tests.fake_run import load_script, make_run

evaluate = load_script("evaluate")
upscale = load_script("upscale")
export = load_script("export")

# frame names whose natural order (8, 9, 10, ...) is not their character order
NAMES = ("f8.png", "f9.png", "f10.png", "f11.png", "f12.png")
SEQUENCE_RUN = (
    "data=sequence",
    "model=espcn_mf",
    "model.features=[8,8]",
    "data.frames=3",
    "data.frame_stride=2",
    "data.target_frame=center",
    "model.fusion_init=glorot",  # neighbours weighted from the start, as in a trained model
)


def write_sequences(root, size: int = 64):
    """``root/cat`` (5 RGB frames) and ``root/cam`` (4 gray frames): crops of real photos at
    offsets shifted by a few pixels a frame, like a panning camera. Returns ``root``."""
    for name, source, count, (y, x), (dy, dx) in (
        ("cat", "chelsea", 5, (50, 100), (3, 5)),
        ("cam", "camera", 4, (200, 200), (4, 2)),
    ):
        (root / name).mkdir(parents=True)
        im = photo(source)
        for i in range(count):
            oy, ox = y + i * dy, x + i * dx
            Image.fromarray(im[oy : oy + size, ox : ox + size]).save(root / name / NAMES[i])
    return root


@pytest.fixture
def clips(tmp_path):
    return write_sequences(tmp_path / "clips")


@pytest.fixture(scope="module")
def espcn():
    keras.utils.set_random_seed(0)
    return make_model("espcn", 4, features=(8, 8))


def make_sequence_run(compose, run_dir, overrides=SEQUENCE_RUN, step: int = 5):
    """A run directory of a multi-frame model whose output is mid-grey plus a small signal (the
    last convolution's bias raised), so that upscaled RGB is rarely clipped."""
    cfg = compose(*overrides, "data.scale=4")
    (run_dir / ".hydra").mkdir(parents=True)
    OmegaConf.save(cfg, run_dir / ".hydra" / "config.yaml")
    keras.utils.set_random_seed(2)
    model = build_model(cfg)
    last = [layer for layer in model.layers if isinstance(layer, keras.layers.Conv2D)][-1]
    last.bias.assign(last.bias + 0.5)
    steps = tf.Variable(step, dtype=tf.int64)
    make_manager(make_checkpoint(model, step=steps), run_dir).save(checkpoint_number=step)
    return run_dir


def test_a_single_frame_model_scores_each_frame_as_evaluate_images(clips, espcn):
    seqs = list_sequences(clips)
    assert [q.name for q in seqs] == ["cam", "cat"]
    assert [p.name for p in seqs[1].files] == list(NAMES)  # natural order
    res = evaluate_sequences(espcn, seqs, 4, 1, 1, 0, keep=2, folder=clips)
    bicubic = evaluate_sequences(None, seqs, 4, 3, 2, 1, folder=clips)
    assert res["n"] == bicubic["n"] == 9
    assert list(res["per_image"]) == [f"{q.name}/{p.name}" for q in seqs for p in q.files]
    for q in seqs:
        reference = evaluate_images(espcn, q.files, 4)["per_image"]
        for p in q.files:
            assert res["per_image"][f"{q.name}/{p.name}"] == reference[p.name]  # identical
            row = bicubic["per_image"][f"{q.name}/{p.name}"]
            assert set(row) == {"psnr_bicubic", "ssim_bicubic"}
            for key in row:
                assert row[key] == reference[p.name][key]
    assert [name for name, *_ in res["panels"]] == ["cam/f8.png", "cam/f9.png"]
    name, bicubic_y, sr_y, hr_y = res["panels"][0]
    assert bicubic_y.shape == sr_y.shape == hr_y.shape == (64, 64)
    assert (
        bicubic["panels"] == []
        and "psnr" not in bicubic
        and "psnr" not in bicubic["per_sequence"]["cat"]
    )


@pytest.mark.parametrize(
    "frames, stride, target",
    [(3, 2, 2), (3, 2, 1), (2, 1, 0), (4, 2, 3)],  # target last, center, first, last
)
def test_the_model_reads_the_window_with_border_frames_repeated(
    clips, monkeypatch, frames, stride, target
):
    seqs = list_sequences(clips)
    lr = {  # model input of each frame: LR Y / 255, float32
        (q.name, i): (prepare(load_image(p), 4).lr_y / 255.0).astype(np.float32)
        for q in seqs
        for i, p in enumerate(q.files)
    }
    seen = []

    def recorder(x, training=False):
        x = np.asarray(x)
        assert x.shape == (1, frames, 16, 16, 1) and x.dtype == np.float32
        window = []
        for j in range(frames):
            hits = [k for k, v in lr.items() if np.array_equal(v, x[0, j, :, :, 0])]
            assert len(hits) == 1
            window.append(hits[0])
        seen.append(window)
        return bicubic_upscale(x[:, target], 4)  # the target frame's bicubic Y

    prepared = []
    real_prepare = evaluation.prepare
    monkeypatch.setattr(
        evaluation, "prepare", lambda im, s, name="": prepared.append(name) or real_prepare(im, s)
    )
    res = evaluate_sequences(recorder, seqs, 4, frames, stride, target, folder=clips)

    expected = [
        [(q.name, i) for i in window_frames(t, len(q.files), frames, stride, target)]
        for q in seqs
        for t in range(len(q.files))
    ]
    assert seen == expected
    assert [w[target] for w in seen] == [(q.name, t) for q in seqs for t in range(len(q.files))]
    assert any(len(set(w)) < frames for w in seen)  # the border windows repeat a frame
    # each frame prepared once, when the first window needing it comes
    assert sorted(prepared) == sorted(f"{q.name}/{p.name}" for q in seqs for p in q.files)
    assert res["n"] == 9


def test_means_per_sequence_then_over_sequences(clips, espcn):
    seqs = list_sequences(clips)
    res = evaluate_sequences(espcn, seqs, 4, 1, 1, 0, folder=clips)
    assert set(res["per_sequence"]) == {"cat", "cam"}
    for key in sr_results.METRICS:
        means = {}
        for q in seqs:
            rows = [r for n, r in res["per_image"].items() if n.startswith(f"{q.name}/")]
            means[q.name] = np.mean([r[key] for r in rows])
            assert res["per_sequence"][q.name][key] == pytest.approx(means[q.name])
        assert res[key] == pytest.approx(np.mean(list(means.values())))
        frame_mean = np.mean([r[key] for r in res["per_image"].values()])
        assert res[key] != pytest.approx(frame_mean)  # 5 and 4 frames: not the frame mean
    assert res["per_sequence"]["cat"]["n"] == 5 and res["per_sequence"]["cam"]["n"] == 4


def test_frames_of_different_sizes_are_named(clips):
    Image.fromarray(photo("chelsea")[:64, :60]).save(clips / "cat" / "f13.png")
    with pytest.raises(ImageFolderError, match=r"f13.png \(60x64\)"):
        evaluate_sequences(None, list_sequences(clips), 4, 3, 1, 2, folder=clips)


@pytest.mark.slow
def test_evaluate_cli_on_a_sequence_run(tmp_path, compose, clips, capsys):
    run = make_sequence_run(compose, tmp_path / "run")
    assert evaluate.main([str(run), str(clips), "--no-progress"]) == 0
    stdout = capsys.readouterr().out
    entry = json.loads((run / "results.json").read_text())["clips"]
    model, _, step = load_model_from_run(run)
    reference = evaluate_sequences(model, list_sequences(clips), 4, 3, 2, 1)
    assert step == 5 and entry["model"] == "espcn_mf3_x4"
    assert (entry["frames"], entry["frame_stride"], entry["target"]) == (3, 2, 1)
    assert entry["n"] == 9 and list(entry["per_image"]) == list(reference["per_image"])
    for key in sr_results.METRICS:
        assert entry[key] == pytest.approx(reference[key])
        for q, row in entry["per_sequence"].items():
            assert row[key] == pytest.approx(reference["per_sequence"][q][key])
    assert "mean over its sequences" in stdout
    rows = [line for line in stdout.splitlines() if line.startswith("| clips")]
    cat = entry["per_sequence"]["cat"]
    assert (
        rows[0]
        == f"| clips | espcn_mf3_x4 (step 5) | 9 | {entry['psnr']:.2f} | {entry['ssim']:.4f} |"
    )
    assert (
        f"| clips/cat | espcn_mf3_x4 (step 5) | 5 | {cat['psnr']:.2f} | {cat['ssim']:.4f} |"
        in rows
    )
    assert len(rows) == 6  # folder, cam, cat: model and bicubic each
    with (run / "results.csv").open() as f:
        table = list(csv.DictReader(f))
    assert [r["file"] for r in table] == [
        *(f"cam/{n}" for n in NAMES[:4]),
        "cam/MEAN",
        *(f"cat/{n}" for n in NAMES),
        "cat/MEAN",
        "MEAN",
    ]
    assert float(table[10]["psnr"]) == pytest.approx(cat["psnr"], abs=1e-5)


def test_evaluate_cli_sequences_with_bicubic_and_a_single_image_run(tmp_path, compose, clips):
    out = tmp_path / "bicubic"
    argv = ["bicubic", str(clips), "--scale", "4", "--sequences", "--out", str(out)]
    assert evaluate.main(argv + ["--no-progress"]) == 0
    entry = json.loads((out / "results.json").read_text())["clips"]
    assert entry["psnr"] == entry["psnr_bicubic"] and entry["frames"] == 1
    assert entry["per_sequence"]["cam"]["ssim"] == entry["per_sequence"]["cam"]["ssim_bicubic"]
    cat = evaluate_images(None, sorted((clips / "cat").iterdir()), 4)["per_image"]
    assert entry["per_image"]["cat/f10.png"]["psnr"] == cat["f10.png"]["psnr_bicubic"]

    run = make_run(compose, tmp_path / "run")  # espcn, data=generator
    assert evaluate.main([str(run), str(clips), "--sequences", "--no-progress"]) == 0
    entry = json.loads((run / "results.json").read_text())["clips"]
    model, _, _ = load_model_from_run(run)
    cam = evaluate_images(model, sorted((clips / "cam").iterdir()), 4)["per_image"]
    assert entry["per_image"]["cam/f9.png"] == cam["f9.png"]
    # without --sequences a folder of sequences is not a folder of images
    assert evaluate.main([str(run), str(clips), "--no-progress"]) == 2


@pytest.mark.slow
def test_upscale_a_sequence_run(tmp_path, compose, clips, capsys):
    run = make_sequence_run(compose, tmp_path / "run")
    out = tmp_path / "out"
    assert upscale.main([str(run), str(clips), str(out), "--tile", "24", "--no-progress"]) == 0
    assert "upscaled 9 of 9 frame(s) of 2 sequence(s) x4" in capsys.readouterr().out
    model, _, _ = load_model_from_run(run)
    # global alignment reads the whole frame; the upscaler aligns whole frames, then tiles the
    # fusion, whose reach is ESPCN's (the early fusion is per pixel)
    assert receptive_radius(model) is None
    assert receptive_radius(SequenceUpscaler(model, 4, 3).model) == 4.0
    for q in list_sequences(clips):
        n = len(q.files)
        images = [read_image(p) for p in q.files]
        lumas = [SequenceUpscaler.luma(im) for im in images]
        for t, p in enumerate(q.files):
            with Image.open(out / q.name / p.name) as im:
                result = np.asarray(im)
                assert im.size == (256, 256) and im.mode == ("L" if q.name == "cam" else "RGB")
            window = window_frames(t, n, 3, 2, 1)
            x = np.stack([lumas[i] for i in window])[None, ..., None] / 255.0
            sr_y = model(tf.constant(x, tf.float32))[0, :, :, 0].numpy() * 255.0
            if result.ndim == 2:  # gray: its own Y
                assert np.abs(result - np.clip(sr_y, 0, 255)).max() <= 0.5 + 1e-3
            else:  # RGB rounded to 8 bits: Y within 1 where no channel is clipped
                inside = np.all((result > 0) & (result < 255), axis=-1)
                assert inside.mean() > 0.9
                assert np.abs(y_channel(result.astype(np.float64)) - sr_y)[inside].max() < 1
            # a single-image model would give another picture: the neighbours matter
            if t == 2:
                alone = model(tf.constant(np.stack([lumas[t]] * 3)[None, ..., None] / 255.0))
                assert np.abs(alone[0, :, :, 0].numpy() * 255.0 - sr_y).max() > 1


def test_upscale_of_one_sequence_folder_and_tiles(tmp_path, compose, clips):
    run = make_sequence_run(compose, tmp_path / "run")
    out = tmp_path / "one"
    assert upscale.main([str(run), str(clips / "cat"), str(out), "--no-progress"]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(NAMES)
    model, _, _ = load_model_from_run(run)
    upscaler = SequenceUpscaler(model, 4, 3)
    images = [read_image(clips / "cat" / n) for n in NAMES]
    lumas = [upscaler.luma(im) for im in images]
    whole = upscaler.window([lumas[i] for i in window_frames(4, 5, 3, 2, 1)], images[4])
    np.testing.assert_array_equal(np.asarray(Image.open(out / "f12.png")), whole)
    tiled = upscaler.window([lumas[i] for i in window_frames(4, 5, 3, 2, 1)], images[4], tile=16)
    assert np.abs(tiled.astype(int) - whole).max() <= 1
    assert whole.std() > 10
    h, w = lumas[0].shape
    with pytest.raises(
        ValueError, match=rf"a window: frames differ in size; its target is {w}x{h} but frame 0"
    ):
        upscaler.window([lumas[0][:, :-4], lumas[1], lumas[2]], images[4])


@pytest.mark.slow
def test_upscale_errors_of_a_sequence_run(tmp_path, compose, clips, capsys):
    run = make_sequence_run(compose, tmp_path / "run")
    src = clips / "cat" / "f8.png"
    assert upscale.main([str(run), str(src), str(tmp_path / "o.png"), "--no-progress"]) == 2
    assert "a multi-frame run upscales sequences" in capsys.readouterr().err
    (clips / "cat" / "f10.png").write_bytes(b"not a png")
    assert upscale.main([str(run), str(clips), str(tmp_path / "o"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    # f10 is frame 2: it fails, and so do f8 (window 0, 0, 2) and f12 (2, 4, 4) that read it
    assert "failed on 3 frame(s)" in err and "frame f10.png of its window" in err
    assert sorted(p.name for p in (tmp_path / "o" / "cat").iterdir()) == ["f11.png", "f9.png"]
    h, w = read_image(clips / "cat" / "f12.png").shape[:2]
    Image.fromarray(photo("chelsea")[:h, : w - 4]).save(clips / "cat" / "f12.png")
    assert upscale.main([str(run), str(clips), str(tmp_path / "p"), "--no-progress"]) == 1
    err = capsys.readouterr().err  # f11 reads f12 (window 1, 3, 4): the sizes are named
    assert (
        f"sequence cat: frames differ in size; f11.png is {w}x{h} but f12.png is {w - 4}x{h}: "
        "the frames of a sequence must share one size"
    ) in err


@pytest.mark.slow
def test_export_refuses_a_multi_frame_run(tmp_path, compose, capsys):
    run = make_sequence_run(compose, tmp_path / "run")
    assert export.main([str(run), str(tmp_path / "saved")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("export.py: error: ") and "multi-frame run (data.frames=3)" in err
    assert "scripts/upscale.py" in err and not (tmp_path / "saved").exists()
    single = make_sequence_run(compose, tmp_path / "single", (*SEQUENCE_RUN, "data.frames=1"))
    record = export.export(single, tmp_path / "saved1")
    assert (tmp_path / "saved1" / "saved_model.pb").is_file()
    assert (record["scale"], record["source"]["step"]) == (4, 5)
