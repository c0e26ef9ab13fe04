"""scripts/evaluate.py and sr.results: golden bicubic figures, a model's scores against a reference
computed independently of ``sr.evaluation`` (skimage), outputs (table, results.json, CSV,
TensorBoard) and errors."""

from __future__ import annotations

import csv
import json
import shutil

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image
from skimage.color import rgb2ycbcr
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

from sr import results as sr_results
from sr.core.degrade import bicubic_downscale, bicubic_upscale
from sr.loading.models import load_model_from_run
from tests.conftest import shared_folder
from tests.fake_run import load_script, make_run, read_scalars

evaluate = load_script("evaluate")

# ../shared/datasets/README.md, bicubic Y-PSNR (dB) / SSIM.
GOLDEN = {
    (2, "Set5"): (33.66, 0.9299),
    (2, "Set14"): (30.24, 0.8688),
    (3, "Set5"): (30.39, 0.8682),
    (3, "Set14"): (27.55, 0.7742),
    (4, "Set5"): (28.42, 0.8104),
    (4, "Set14"): (26.00, 0.7027),
}
COUNTS = {"Set5": 5, "Set14": 14}


def check_golden(entry: dict, scale: int, name: str) -> None:
    psnr, ssim = GOLDEN[scale, name]
    assert entry["n"] == COUNTS[name]
    assert entry["psnr"] == pytest.approx(psnr, abs=0.05)
    assert entry["ssim"] == pytest.approx(ssim, abs=0.002)
    assert entry["psnr"] == pytest.approx(
        np.mean([r["psnr"] for r in entry["per_image"].values()])
    )


@pytest.mark.slow
def test_bicubic_x4_golden_figures_through_the_cli(tmp_path, capsys):
    """The command's ``main`` in this process (a script's process: test_plugins.py's, whose
    scripts import a plug-in model again)."""
    set5, set14 = shared_folder("Set5"), shared_folder("Set14")
    out = tmp_path / "eval"
    argv = [
        "bicubic",
        str(set5),
        str(set14),
        "--scale",
        "4",
        "--out",
        str(out),
        "--no-progress",
    ]
    code = evaluate.main(argv)
    stdout, stderr = capsys.readouterr()
    assert code == 0, stderr

    results = json.loads((out / "results.json").read_text())
    assert list(results) == ["Set5", "Set14"]
    for name in results:
        check_golden(results[name], 4, name)
        assert results[name]["model"] == "bicubic" and results[name]["scale"] == 4
    assert sorted(results["Set14"]["per_image"]) == sorted(p.name for p in set14.iterdir())
    assert f"| Set5 | bicubic | 5 | {results['Set5']['psnr']:.2f} |" in stdout
    assert f"| Set14 | bicubic | 14 | {results['Set14']['psnr']:.2f} |" in stdout

    with (out / "results.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 5 + 1 + 14 + 1
    mean = next(r for r in rows if r["folder"] == "Set5" and r["file"] == "MEAN")
    assert float(mean["psnr"]) == pytest.approx(results["Set5"]["psnr"], abs=1e-5)

    scalars = read_scalars(out / "tb")
    assert scalars["eval/Set5/psnr"] == [(0, pytest.approx(results["Set5"]["psnr"], abs=1e-4))]
    assert scalars["eval/Set14/ssim"] == [(0, pytest.approx(results["Set14"]["ssim"], abs=1e-6))]


@pytest.mark.slow
@pytest.mark.parametrize("scale", [2, 3])
def test_bicubic_x2_x3_golden_figures(scale):
    folders = [shared_folder("Set5"), shared_folder("Set14")]
    results = sr_results.evaluate(None, folders, scale, "bicubic", 0, None, progress=False)
    for name in ("Set5", "Set14"):
        check_golden(results[name], scale, name)


def _y(image: np.ndarray) -> np.ndarray:
    """float64 ``[H, W]`` Y (BT.601, 16..235) of ``[H, W, 3]`` RGB in [0, 255] by skimage; a gray
    ``[H, W, 1]`` image is its own Y."""
    if image.shape[-1] == 1:
        return image[..., 0].astype(np.float64)
    return rgb2ycbcr(image / 255.0)[..., 0]


def _to_8_bits(x) -> np.ndarray:
    """Round half up to the 8-bit grid and clip, as a saved uint8 image is."""
    return np.clip(np.floor(np.asarray(x, np.float64) + 0.5), 0, 255)


def reference_scores(model, path, scale: int) -> dict:
    """The SR literature's protocol written out with skimage, independently of ``sr.evaluation``
    and ``sr.metrics``; only the MATLAB-bicubic operator (tested against MATLAB in
    test_degrade.py) is the project's."""
    hr = np.asarray(Image.open(path), dtype=np.float64)
    hr = hr[..., None] if hr.ndim == 2 else hr
    h, w = hr.shape[0] // scale * scale, hr.shape[1] // scale * scale
    hr = hr[:h, :w]  # modcrop
    lr = _to_8_bits(bicubic_downscale(hr, scale).numpy())
    bicubic = _to_8_bits(bicubic_upscale(lr, scale).numpy())
    x = tf.constant((_y(lr) / 255.0)[None, :, :, None], tf.float32)
    sr_y = _to_8_bits(model(x, training=False).numpy()[0, :, :, 0].astype(np.float64) * 255.0)
    hr_y, b = _y(hr), scale

    def score(y):
        test, ref = y[b:-b, b:-b], hr_y[b:-b, b:-b]
        ssim = structural_similarity(
            ref,
            test,
            gaussian_weights=True,
            sigma=1.5,
            use_sample_covariance=False,
            data_range=255,
        )
        return peak_signal_noise_ratio(ref, test, data_range=255), ssim

    (psnr, ssim), (psnr_b, ssim_b) = score(sr_y), score(_y(bicubic))
    return {"psnr": psnr, "ssim": ssim, "psnr_bicubic": psnr_b, "ssim_bicubic": ssim_b}


def test_a_run_is_scored_by_the_protocol_and_logged(tmp_path, compose, photo_dir, capsys):
    run = make_run(compose, tmp_path / "run", steps=(5,))
    assert evaluate.main([str(run), str(photo_dir), "--no-progress"]) == 0
    stdout = capsys.readouterr().out

    model, _, step = load_model_from_run(run)
    results = json.loads((run / "results.json").read_text())
    entry = results["hr"]
    assert step == 5 and entry["step"] == 5 and entry["model"] == "espcn_x4"
    files = sorted(photo_dir.iterdir())
    assert entry["n"] == 7 == len(files) and list(entry["per_image"]) == [p.name for p in files]
    reference = {p.name: reference_scores(model, p, 4) for p in files}  # RGB and gray photos
    for name, row in entry["per_image"].items():
        for key in sr_results.METRICS:
            tol = 1e-6 if key.startswith("psnr") else 1e-8
            assert row[key] == pytest.approx(reference[name][key], abs=tol), (name, key)
    for key in sr_results.METRICS:
        assert entry[key] == pytest.approx(np.mean([r[key] for r in reference.values()]))
    # an untrained model is far below bicubic: the two rows are really different methods
    assert entry["psnr"] < entry["psnr_bicubic"] - 3

    rows = [line for line in stdout.splitlines() if line.startswith("| hr |")]
    assert rows == [
        f"| hr | espcn_x4 (step 5) | 7 | {entry['psnr']:.2f} | {entry['ssim']:.4f} |",
        f"| hr | bicubic | 7 | {entry['psnr_bicubic']:.2f} | {entry['ssim_bicubic']:.4f} |",
    ]
    assert (run / "results.csv").is_file()
    scalars = read_scalars(run / "tb")
    assert set(scalars) == {f"eval/hr/{k}" for k in sr_results.METRICS}
    assert scalars["eval/hr/psnr"] == [(5, pytest.approx(entry["psnr"], abs=1e-4))]


def test_a_chosen_checkpoint_and_output_folder(tmp_path, compose, photo_dir):
    run = make_run(compose, tmp_path / "run", steps=(3, 8))
    out = tmp_path / "elsewhere"
    argv = [str(run), str(photo_dir), "--checkpoint", "ckpt-3", "--out", str(out), "--no-progress"]
    assert evaluate.main(argv) == 0
    older = json.loads((out / "results.json").read_text())["hr"]
    assert older["step"] == 3 and older["checkpoint"].endswith("ckpt-3")
    assert not (run / "results.json").exists()
    assert evaluate.main([str(run), str(photo_dir), "--out", str(out), "--no-progress"]) == 0
    latest = json.loads((out / "results.json").read_text())["hr"]
    assert latest["step"] == 8 and latest["psnr"] != older["psnr"]
    assert latest["psnr_bicubic"] == older["psnr_bicubic"]
    steps = [s for s, _ in read_scalars(run / "tb")["eval/hr/psnr"]]
    assert sorted(steps) == [3, 8]


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv, message",
    [
        (["bicubic", "{photos}"], "bicubic needs --scale"),
        (
            ["bicubic", "{photos}", "--scale", "4", "--checkpoint", "ckpt-1"],
            "--checkpoint and --weights apply to a run directory",
        ),
        (["{run}", "{photos}", "--scale", "2"], "was trained at x4; --scale 2 applies to bicubic"),
        (["{run}", "{photos}", "--checkpoint", "ckpt-99"], "no checkpoint"),
        (["{tmp}", "{photos}"], "is not a run directory of train.py"),
        (["bicubic", "{tmp}/missing", "--scale", "4"], "missing does not exist"),
        (["bicubic", "{photos}", "{tmp}/other/hr", "--scale", "4"], "are both named 'hr'"),
        (  # before any upscaling: not a NotADirectoryError after all of it (issue 37)
            ["{run}", "--real", "{photos}", "--save", "{tmp}/notes.txt"],
            "--save {tmp}/notes.txt is a file, not a folder: give a folder (new or existing)",
        ),
        (
            ["{run}", "--real", "{photos}", "--save", "{tmp}/notes.txt/real"],
            "--save {tmp}/notes.txt/real is a file, not a folder (its parent {tmp}/notes.txt is)",
        ),
        (  # a folder of sequences given to the single-image protocol
            ["bicubic", "{tmp}/clips", "--scale", "4"],
            "holds no .png, .jpg or .jpeg file, but 1 subfolder(s) of images (clip_001): a folder "
            "of sequences? Score it frame by frame with evaluate.py --sequences",
        ),
    ],
)
def test_errors_name_the_fault(tmp_path, compose, photo_dir, capsys, argv, message):
    run = make_run(compose, tmp_path / "run")
    (tmp_path / "other" / "hr").mkdir(parents=True)
    (tmp_path / "notes.txt").write_text("not a folder\n")
    (tmp_path / "clips" / "clip_001").mkdir(parents=True)
    shutil.copy(next(photo_dir.iterdir()), tmp_path / "clips" / "clip_001" / "0001.png")
    values = {"run": run, "photos": photo_dir, "tmp": tmp_path}
    message = message.format(**values)
    argv = [a.format(**values) for a in argv] + ["--out", str(tmp_path / "out"), "--no-progress"]
    assert evaluate.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("evaluate.py: error: ") and message in err
    assert not (tmp_path / "out" / "results.json").exists()
