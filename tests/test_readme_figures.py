"""benchmarks/readme_figures.py's parsers on sample text (no subprocess): pytest's summary line,
/proc/cpuinfo, and the train.log lines that time the start-up and the first logged step."""

from __future__ import annotations

import datetime
import re

import pytest

from tests.fake_run import load_script

rf = load_script("readme_figures", "benchmarks")

CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Processor
flags\t\t: fpu sse2 avx2 {flag} avx512cd

processor\t: 1
model name\t: Intel(R) Xeon(R) Processor
flags\t\t: fpu sse2 avx2 {flag} avx512cd
"""


@pytest.mark.parametrize("flag, avx512", [("avx512f", True), ("avx512bw", False)])
def test_cpu_info_reads_the_model_the_cores_and_avx512f(flag, avx512):
    info = rf.cpu_info(CPUINFO.format(flag=flag))
    assert info == {"model": "Intel(R) Xeon(R) Processor", "cores": 2, "avx512": avx512}


@pytest.mark.parametrize(
    "last, passed, selected",
    [
        ("442 passed, 78 deselected in 150.12s (0:02:30)", 442, 442),
        (
            "1 failed, 439 passed, 2 skipped, 78 deselected, 3 warnings in 151.0s (0:02:31)",
            439,
            442,
        ),
        ("============ 520 passed, 1 warning in 700.51s (0:11:40) ============", 520, 520),
        ("2 passed, 1 error in 3.20s", 2, 3),
    ],
)
def test_pytest_summary_counts_passed_of_selected(last, passed, selected):
    out = f"....F..s  [ 50%]\n.....  [100%]\nFAILED tests/test_x.py::test_y - in 3s\n{last}\n"
    got = rf.pytest_summary(out)
    assert got[:2] == (passed, selected)
    assert got[2] == last.strip("= ")


def test_pytest_summary_refuses_output_without_one():
    with pytest.raises(ValueError, match="no pytest summary"):
        rf.pytest_summary("ERROR: file or directory not found: tests/nope.py\n")


def test_log_seconds_times_the_training_line_and_the_first_timing_line():
    log = (
        "[2026-11-23 19:21:00,500][train][INFO] - run directory /tmp/x\n"
        "[2026-11-23 19:21:20,250][sr.train.loop][INFO] - training espcn_x4 for 5000 steps "
        "from step 0 (data=tfrecord, global batch 16, default strategy)\n"
        "[2026-11-23 19:21:31,000][sr.train.loop][INFO] - [0:00:10.750000] step 100/5000  "
        "loss 0.05  step 107.5 ms  data-wait 0.10 ms (0.1%)  149 patches/s  lr 1.00e-03\n"
    )
    start = datetime.datetime(2026, 11, 23, 19, 21, 0).timestamp()
    assert rf.log_seconds(log, start, rf.TRAINING) == pytest.approx(20.25)
    assert rf.log_seconds(log, start, rf.FIRST_STEP) == pytest.approx(31.0)
    assert rf.FIRST_STEP.search(log).group(1) == "100"
    assert rf.log_seconds(log, start, re.compile("final step")) is None
