"""The run's reports (``sr.train.report.Reporter``), built alone from the real default config: the
timing line of a log window, the final summary and the HParams record."""

import logging
import re

import hydra
import tensorflow as tf

from sr.train.budget import TimeBudget
from sr.train.optimizers import optimizer_choice
from sr.train.report import Reporter
from sr.train.timing import StepTimer
from tests.trainer_parts import PixelPart, build_parts


def test_the_timing_line_the_summary_and_the_hparams(tmp_path, compose, caplog):
    cfg = compose("train.steps=10")
    run = build_parts(tmp_path)
    reporter = Reporter(
        cfg, tf.summary.create_noop_writer(), run.state, TimeBudget(None, run.state.elapsed,
        run.state.progress), model=run.model, optimizer=run.optimizer,
        optimizer_choice=optimizer_choice(cfg), loss=hydra.utils.instantiate(cfg.loss),
        part=PixelPart(), data_mode="generator", replicas=1, run_name="run-1",
    )  # fmt: skip
    timer = StepTimer(16)
    with caplog.at_level(logging.INFO, logger="sr.train.loop"):
        reporter.log_window(timer, 0.5)  # no step since the last: no line
        assert caplog.text == ""
        for _ in range(2):
            timer.step_done()
        run.state.step.assign(2)
        reporter.log_window(timer, 0.5)
        line = (
            r"\[[0-9:.]+\] step 2/10  loss 0.50000  step [0-9.]+ ms  data-wait [0-9.]+ ms "
            r"\([0-9.]+%\)  [0-9]+ patches/s  lr [0-9.]+e[-+][0-9]+"
        )
        assert re.search(line, caplog.text)
        final = reporter.finish(timer, {}, None)
    assert final["step"] == 2 and final["rollbacks"] == 0 and final["interrupted"] is None
    assert "final step 2: mean step" in caplog.text and reporter.final is final
    hparams = reporter.hparams()
    assert hparams["parameters"] == run.model.count_params() == 10
    assert hparams["data_mode"] == "generator" and hparams["discriminator"] == "none"
    assert hparams["steps_reached"] == 2 and hparams["lr_scale"] == 1.0
