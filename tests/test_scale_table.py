"""benchmarks/scale_table.py: the conv FLOP counter against hand computations (a tiny stack with a
stride, a non-square kernel and a pixel shuffle; ESPCN; EDSR-baseline), the step-time and cores
formulas on hand examples, the CPU cost lookup, and the table end to end on ESPCN alone."""

from __future__ import annotations

import json

import keras
import pytest

from sr.models.layers import PixelShuffle
from sr.models.registry import make_model
from tests.conftest import ROOT
from tests.fake_run import load_script

st = load_script("scale_table", "benchmarks")


def test_conv_flops_by_hand():
    # 3x3, 2 -> 3 channels on an 8x8 output: 9 * 2 * 3 multiply-adds per output pixel
    assert st.conv_flops((3, 3), 2, 3, 8, 8) == 2 * 9 * 2 * 3 * 64
    assert st.conv_flops((1, 1), 4, 4, 2, 2, groups=2) == 2 * 1 * 2 * 4 * 4


def test_model_flops_tiny_stack_follows_shapes():
    x = keras.Input((None, None, 2))
    y = keras.layers.Conv2D(3, 3, padding="same")(x)  # 8x8x2 -> 8x8x3
    y = keras.layers.Conv2D(4, 1, strides=2)(y)  # -> 4x4x4
    y = PixelShuffle(2)(y)  # -> 8x8x1
    y = keras.layers.Conv2D(2, (3, 1), padding="valid")(y)  # -> 6x8x2
    model = keras.Model(x, y)
    f = st.model_flops(model, 8, 8)
    hand = [2 * 9 * 2 * 3 * 8 * 8, 2 * 1 * 3 * 4 * 4 * 4, 2 * 3 * 1 * 1 * 2 * 6 * 8]
    assert [v for _, v in f["layers"]] == hand
    assert f["flops"] == sum(hand) and f["per_pixel"] == sum(hand) / 64
    assert f["params"] == (9 * 2 * 3 + 3) + (3 * 4 + 4) + (3 * 1 * 2 + 2)


@pytest.mark.parametrize("scale", [3, 4])
def test_espcn_flops_match_its_structure(scale):
    # Shi et al. 2016: 5x5x64, 3x3x32, 3x3x(r^2) on one channel, all at LR resolution
    f = st.model_flops(make_model("espcn", scale=scale), 24, 20)
    per_pixel = 2 * (25 * 1 * 64 + 9 * 64 * 32 + 9 * 32 * scale**2)
    assert f["per_pixel"] == per_pixel
    assert f["flops"] == per_pixel * 24 * 20


def test_edsr_baseline_flops_by_hand():
    # head 1->64, 16 blocks of two 64->64 and the body's last conv (33), x2 stage 64->256 at LR,
    # x2 stage 64->256 at 2x (4 pixels per LR pixel), tail 64->1 at 4x (16 pixels)
    f = st.model_flops(make_model("edsr", scale=4), 12, 12)
    per_pixel = 2 * 9 * (1 * 64 + 33 * 64 * 64 + 64 * 256 + 4 * 64 * 256 + 16 * 64 * 1)
    assert f["per_pixel"] == per_pixel


def test_step_time_and_cores_by_hand():
    # 1 GFLOP per patch, batch 16, 100 TFLOP/s at half efficiency, 1 ms fixed:
    # 1 ms + 3 * 1e9 * 16 / 50e12 = 1.96 ms; 16 / 1.96 ms = 8163 patches/s per GPU
    t = st.step_time(1e9, 16, 100e12, efficiency=0.5, overhead=1e-3)
    assert t == pytest.approx(1.96e-3)
    # 8 GPUs x 1000 patches/s x 0.5 CPU-ms per patch = 4 cores busy; at 90 %: 4.44 cores
    assert st.cores_needed(8, 1000, 0.5e-3, utilisation=0.9) == pytest.approx(4 / 0.9)
    assert st.cores_needed(1, 16 / t, 0.05e-3, utilisation=1.0) == pytest.approx(16 / t * 5e-5)


def test_cpu_cost_takes_the_worst_run_and_the_sweep():
    runs = [
        {
            "pipelines": {"tfrecord": {"cpu_s_per_1000": 0.04}},
            "ppi_sweep": {"64": {"cpu_s_per_1000": 0.5}},
        },
        {
            "pipelines": {"tfrecord": {"cpu_s_per_1000": 0.06}},
            "ppi_sweep": {"64": {"cpu_s_per_1000": 0.4}},
        },
    ]
    assert st.cpu_cost(runs, "tfrecord") == (pytest.approx(6e-5), pytest.approx([4e-5, 6e-5]))
    assert st.cpu_cost(runs, "64")[0] == pytest.approx(5e-4)
    with pytest.raises(KeyError):
        st.cpu_cost(runs, "ceiling")
    # twice the patch side: 4x the non-decode cost, the decode share per patch unchanged
    assert st.scale_cost(0.5e-3, 2 * st.BENCH_PATCH, 0.3e-3) == pytest.approx(0.3e-3 + 4 * 0.2e-3)
    assert st.patch_bytes(96) == 4 * (96 * 96 + 24 * 24)


def test_table_end_to_end_on_espcn(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(st, "MODEL_CONF", {"ESPCN": ("espcn", {})})
    out = tmp_path / "scale.md"
    assert st.main(["--out", str(out), "--no-per-gpu"]) == 0
    text = out.read_text()
    assert text == capsys.readouterr().out.split("\nwrote ")[0]
    rows = [line for line in text.splitlines() if line.startswith("| ESPCN | ")]
    assert len(rows) == 1 + len(st.BATCHES) * len(st.GPU_COUNTS)  # model row + the table
    # the ESPCN, batch 16, 8 GPU row by hand from the measured JSON
    bench = [json.loads(p.read_text()) for p in st.DEFAULT_BENCH if p.is_file()]
    c = max(r["pipelines"]["tfrecord"]["cpu_s_per_1000"] for r in bench) / 1000
    f = 2 * (25 * 64 + 9 * 64 * 32 + 9 * 32 * 16) * 24 * 24
    t = st.STEP_OVERHEAD_S + 3 * f * 16 / (st.GPUS[st.DEFAULT_GPU][0] * st.EFFICIENCY)
    cores = 8 * 16 / t * c / st.UTILISATION
    row = next(r for r in rows if r.startswith("| ESPCN | 16 | 8 |"))
    assert f"| {16 / t:,.0f} | {8 * 16 / t:,.0f} | {st._n(cores)} |" in row
    assert (ROOT / "docs" / "perf" / "bench_data.json").is_file()
