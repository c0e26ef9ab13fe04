"""benchmarks/pytorch_model_timing.py: its options refused before any work, a failing backend
reported in its row, the timing loop, and (slow) the tiny compact model through every backend."""

from __future__ import annotations

import pytest

from tests.fake_run import load_script

timing = load_script("pytorch_model_timing", "benchmarks")

# the start and end of the TFLite converter's message for RRDBNet's nearest upsampling (TF 2.21)
FLEX = (
    'Could not translate MLIR to FlatBuffer.<unknown>:0: error: loc(callsite(fused["Conv2D:", '
    "\"rrdbnet_x4_32_1/rrdbnet_x4_1/conv2d_33_1/convolution\"])): 'tf.Conv2D' op is neither a "
    "custom op nor a flex op\n<unknown>:0: note: Error code: ERROR_NEEDS_FLEX_OPS\n<unknown>:0: "
    "error: failed while converting: 'main': Some ops are not supported by the native TFLite "
    "runtime, you can enable TF kernels fallback using TF Select.\nTF Select ops: Conv2D\n"
    "Details:\n\ttf.Conv2D(tensor<?x?x128x8xf32>, tensor<3x3x8x8xf32>)"
)


class ConverterError(Exception):
    """Stands for ``tensorflow.lite.python.convert_phase.ConverterError`` (its name is shown)."""


def test_a_converter_failure_is_its_error_code_and_ops_in_one_row():
    row = timing.cells({"error": timing.reason(ConverterError(FLEX))})
    assert row == "failed: ConverterError: ERROR_NEEDS_FLEX_OPS, TF Select ops: Conv2D | | "


def test_another_failure_is_cut_to_one_line_without_a_table_pipe():
    text = timing.reason(ValueError("shape a | b\n" * 40))
    assert text.startswith("ValueError: shape a / b shape a / b")
    assert len(text) == timing.REASON_CHARS and text.endswith("...")
    assert "|" not in text and "\n" not in text


def test_a_measured_row_gives_median_range_psnr_and_megabytes():
    row = {"ms": [1234.4, 1190.2, 1510.0], "psnr": 48.27, "mb": 4.63}
    assert timing.cells(row) == "1,234 [1,190-1,510] | 48.3 | 4.6"
    assert timing.cells({**row, "psnr": None}).split(" | ")[1] == "(reference)"


def test_timed_returns_the_warm_up_output_and_one_time_per_repeat():
    calls = []
    output, ms = timing.timed(lambda x: calls.append(x) or len(calls), "x", 3)
    assert output == 1 and len(calls) == 4 and len(ms) == 3
    assert all(t >= 0 for t in ms)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--size", "8"], "--size 8: a TFLite export needs an LR side of at least 16"),
        (["--repeat", "0"], "--repeat 0: time at least 1 run"),
        (["--models", "compact,edsr"], "give one or more of compact, rrdbnet"),
        (["--out", "{busy}"], "already exists and is not empty"),
    ],
)
def test_bad_options_exit_2_before_any_work(tmp_path, capsys, argv, message):
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("mine")
    with pytest.raises(SystemExit) as exit_info:
        timing.main([a.format(busy=busy) for a in argv])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert [p.name for p in busy.iterdir()] == ["keep.txt"]


def test_models_keep_the_order_given():
    assert timing.model_list(" rrdbnet, compact ") == ["rrdbnet", "compact"]


@pytest.mark.slow
def test_tiny_compact_runs_through_every_backend(tmp_path, capsys):
    out = tmp_path / "exports"
    argv = ["--tiny", "--models", "compact", "--size", "32", "--repeat", "1", "--out", str(out)]
    assert timing.main(argv) == 0
    text = capsys.readouterr().out
    assert "x4, RGB, LR 32 x 32 -> SR 128 x 128" in text and "ONNX Runtime" in text
    rows = [line.split(" | ") for line in text.splitlines() if line.startswith("| realesr")]
    assert [r[3] for r in rows] == list(timing.BACKENDS)
    assert all(r[1] == "4,920" for r in rows)  # features 8, 2 convs, RGB x4
    psnr = {r[3]: r[5] for r in rows}
    assert psnr["keras"] == "(reference)"
    assert all(psnr[b] == "inf" or float(psnr[b]) >= 45 for b in ("tflite", "onnx"))
    assert float(psnr["tflite int8"]) > 30  # int8, calibrated on the timed tile
    for backend in ("tflite", "tflite_int8", "onnx"):
        assert (out / "compact" / backend / "export.json").is_file()
