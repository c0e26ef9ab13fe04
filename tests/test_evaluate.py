"""scripts/evaluate.py: golden bicubic figures, the model path against the protocol, outputs
(table, results.json, CSV, TensorBoard) and errors."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import numpy as np
import pytest

from sr.evaluation import evaluate_folder
from sr.train.checkpoint import load_model_from_run
from tests.conftest import ROOT, shared_folder
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


def test_bicubic_x4_golden_figures_through_the_cli(tmp_path):
    set5, set14 = shared_folder("Set5"), shared_folder("Set14")
    out = tmp_path / "eval"
    cmd = [
        sys.executable,
        "scripts/evaluate.py",
        "bicubic",
        str(set5),
        str(set14),
        "--scale",
        "4",
        "--out",
        str(out),
        "--no-progress",
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr

    results = json.loads((out / "results.json").read_text())
    assert list(results) == ["Set5", "Set14"]
    for name in results:
        check_golden(results[name], 4, name)
        assert results[name]["model"] == "bicubic" and results[name]["scale"] == 4
    assert sorted(results["Set14"]["per_image"]) == sorted(p.name for p in set14.iterdir())
    assert f"| Set5 | bicubic | 5 | {results['Set5']['psnr']:.2f} |" in proc.stdout
    assert f"| Set14 | bicubic | 14 | {results['Set14']['psnr']:.2f} |" in proc.stdout

    with (out / "results.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 5 + 1 + 14 + 1
    mean = next(r for r in rows if r["folder"] == "Set5" and r["file"] == "MEAN")
    assert float(mean["psnr"]) == pytest.approx(results["Set5"]["psnr"], abs=1e-5)

    scalars = read_scalars(out / "tb")
    assert scalars["eval/Set5/psnr"] == [(0, pytest.approx(results["Set5"]["psnr"], abs=1e-4))]
    assert scalars["eval/Set14/ssim"] == [(0, pytest.approx(results["Set14"]["ssim"], abs=1e-6))]


@pytest.mark.parametrize("scale", [2, 3])
def test_bicubic_x2_x3_golden_figures(scale):
    folders = [shared_folder("Set5"), shared_folder("Set14")]
    results = evaluate.evaluate(None, folders, scale, "bicubic", 0, None, progress=False)
    for name in ("Set5", "Set14"):
        check_golden(results[name], scale, name)


def test_a_run_is_scored_by_the_protocol_and_logged(tmp_path, compose, photo_dir, capsys):
    run = make_run(compose, tmp_path / "run", steps=(5,))
    assert evaluate.main([str(run), str(photo_dir), "--no-progress"]) == 0
    stdout = capsys.readouterr().out

    model, _, step = load_model_from_run(run)
    reference = evaluate_folder(model, photo_dir, 4)  # THE protocol (sr.evaluation)
    results = json.loads((run / "results.json").read_text())
    entry = results["hr"]
    assert step == 5 and entry["step"] == 5 and entry["model"] == "espcn_x4"
    assert entry["n"] == 7 == len(entry["per_image"])
    for key in ("psnr", "ssim", "psnr_bicubic", "ssim_bicubic"):
        assert entry[key] == pytest.approx(reference[key], abs=1e-9)
    for name, row in entry["per_image"].items():
        assert row["psnr"] == pytest.approx(reference["per_image"][name]["psnr"], abs=1e-9)
    # an untrained model is far below bicubic: the two rows are really different methods
    assert entry["psnr"] < entry["psnr_bicubic"] - 3

    rows = [line for line in stdout.splitlines() if line.startswith("| hr |")]
    assert rows == [
        f"| hr | espcn_x4 (step 5) | 7 | {entry['psnr']:.2f} | {entry['ssim']:.4f} |",
        f"| hr | bicubic | 7 | {entry['psnr_bicubic']:.2f} | {entry['ssim_bicubic']:.4f} |",
    ]
    assert (run / "results.csv").is_file()
    scalars = read_scalars(run / "tb")
    assert set(scalars) == {f"eval/hr/{k}" for k in evaluate.METRICS}
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


@pytest.mark.parametrize(
    "argv, message",
    [
        (["bicubic", "{photos}"], "bicubic needs --scale"),
        (
            ["bicubic", "{photos}", "--scale", "4", "--checkpoint", "ckpt-1"],
            "--checkpoint applies",
        ),
        (["{run}", "{photos}", "--scale", "2"], "was trained at x4; --scale 2 applies to bicubic"),
        (["{run}", "{photos}", "--checkpoint", "ckpt-99"], "no checkpoint"),
        (["{tmp}", "{photos}"], "is not a run directory of train.py"),
        (["bicubic", "{tmp}/missing", "--scale", "4"], "missing does not exist"),
        (["bicubic", "{photos}", "{tmp}/other/hr", "--scale", "4"], "are both named 'hr'"),
    ],
)
def test_errors_name_the_fault(tmp_path, compose, photo_dir, capsys, argv, message):
    run = make_run(compose, tmp_path / "run")
    (tmp_path / "other" / "hr").mkdir(parents=True)
    values = {"run": run, "photos": photo_dir, "tmp": tmp_path}
    argv = [a.format(**values) for a in argv] + ["--out", str(tmp_path / "out"), "--no-progress"]
    assert evaluate.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("evaluate.py: error: ") and message in err
    assert not (tmp_path / "out" / "results.json").exists()


def test_edsr_baseline_div2k_recipe(compose):
    cfg = compose("experiment=edsr_baseline_div2k")
    assert cfg.model._target_ == "sr.models.build_edsr_baseline"
    assert (cfg.model.features, cfg.model.blocks) == (64, 16)
    assert (cfg.train.loss, cfg.train.lr, cfg.train.lr_schedule) == ("l1", 1e-4, "step")
    assert (cfg.train.lr_decay_steps, cfg.train.steps) == (200_000, 300_000)
    assert (cfg.train.beta_1, cfg.train.beta_2) == (0.9, 0.999)
    assert (cfg.data.batch_size, cfg.data.patch_size, cfg.data.scale) == (16, 192, 4)
    assert cfg.data.hr_dir.endswith("data/DIV2K/DIV2K_train_HR")
    assert cfg.data.val_dir.endswith("data/DIV2K/DIV2K_valid_HR")
