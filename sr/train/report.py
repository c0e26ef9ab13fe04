"""What a run reports (:class:`Reporter`, a collaborator of :class:`sr.train.loop.Trainer`): the
timing line and TensorBoard scalars of each log window, the final summary and the HParams record
of the run."""

from __future__ import annotations

import logging

import tensorflow as tf

from sr.evaluation import METRICS
from sr.models import registry
from sr.train.budget import TimeBudget
from sr.train.schedule import current_lr
from sr.train.state import RunState
from sr.train.timing import StepTimer

log = logging.getLogger("sr.train.loop")  # the timing lines as before (scripts read train.log)


def describe_model(model_cfg) -> str:
    """``edsr(features=32, blocks=8, ...)``: the architecture and its configured keys, which
    tell apart presets of one architecture (``edsr_baseline`` and ``edsr_lite``) in HParams."""
    args = ", ".join(f"{k}={v}" for k, v in registry.model_keys(model_cfg).items())
    return f"{registry.spec_of(model_cfg).name}({args})"


class Reporter:
    """The run's reports: the timing line and TensorBoard scalars of each log window, the final
    summary and the HParams record.

    Args:
        cfg: the composed config (``train``, ``data``, ``model``; the HParams' choices).
        writer: the run's summary writer.
        state: the run's state (the step, the guard's rollbacks and learning-rate factor).
        budget: the time budget (the minutes used, in the final summary).
        model: the Keras model trained (its parameters).
        optimizer: its optimizer (the current learning rate).
        optimizer_choice: ``sr.train.optimizers.optimizer_choice(cfg)`` (its name and keys).
        loss: the run's loss (its ``name`` and ``describe()``).
        part: the way of training (its log line, its ``describe()``).
        data_mode: the data source's ``mode`` (``generator``, ``tfrecord``, ...).
        replicas: the strategy's replicas in sync.
        run_name: the HParams trial id (the run folder's name).

    Attributes:
        final: the last result of :meth:`finish` (``{}`` before).
    """

    def __init__(self, cfg, writer, state: RunState, budget: TimeBudget, *, model, optimizer,
                 optimizer_choice, loss, part, data_mode: str, replicas: int,
                 run_name: str):  # fmt: skip
        self.cfg, self.writer, self.state, self.budget = cfg, writer, state, budget
        self.model, self.optimizer, self.optimizer_choice = model, optimizer, optimizer_choice
        self.loss, self.part, self.data_mode, self.replicas = loss, part, data_mode, replicas
        self.run_name = run_name
        self.final: dict = {}

    def log_window(self, timer: StepTimer, loss: float) -> None:
        """The timing line and the ``train/`` scalars of the steps since the last one."""
        stats = timer.close_window()
        if stats is None:
            return
        lr = current_lr(self.optimizer)
        log.info(
            "[%s] step %d/%d  loss %.5f  step %.1f ms  data-wait %.2f ms (%.1f%%)  "
            "%.0f patches/s  lr %.2e",
            timer.elapsed(),
            self.state.at(),
            self.cfg.train.steps,
            loss,
            stats.step_time_ms,
            stats.data_wait_ms,
            100 * stats.data_wait_share,
            stats.patches_per_sec,
            lr,
        )
        with self.writer.as_default(step=self.state.at()):
            tf.summary.scalar("train/loss", loss)
            tf.summary.scalar("train/step_time_ms", stats.step_time_ms)
            tf.summary.scalar("train/data_wait_ms", stats.data_wait_ms)
            tf.summary.scalar("train/patches_per_sec", stats.patches_per_sec)
            tf.summary.scalar("train/lr", lr)
        self.part.log_window(self.state.at(), self.writer)

    def finish(self, timer: StepTimer, res: dict, interrupted) -> dict:
        """The result of :meth:`fit` (see there), logged and recorded in HParams."""
        summary = timer.summary()
        final = {
            "step": self.state.at(),
            "interrupted": interrupted,
            "rollbacks": int(self.state.guard.rollbacks.numpy()),
        }
        if self.budget.seconds is not None:
            final["budget_minutes_used"] = self.budget.elapsed_seconds() / 60
            log.info(
                "steps reached: %d of train.steps=%d in %.2f of %s budget minutes; final lr %.3g",
                final["step"],
                self.cfg.train.steps,
                final["budget_minutes_used"],
                self.cfg.train.max_minutes,
                current_lr(self.optimizer),
            )
        if summary:
            final.update(
                step_time_ms=summary.step_time_ms,
                data_wait_ms=summary.data_wait_ms,
                data_wait_share=summary.data_wait_share,
                patches_per_sec=summary.patches_per_sec,
            )
        for key in (*METRICS, "ema_psnr", "ema_ssim", "niqe", "niqe_bicubic", "ema_niqe"):
            if key in res:
                final[f"val/{key}"] = res[key]
        self.write_hparams(final)
        self.writer.flush()
        self._log_final(final)
        self.final = final
        return final

    def _log_final(self, final: dict) -> None:
        if "val/psnr" in final:
            log.info(
                "final step %d: val PSNR %.2f dB vs bicubic %.2f dB (%+.2f dB), SSIM %.4f vs "
                "%.4f; mean step %.1f ms, data-wait %.2f ms (%.1f%% of step time)",
                final["step"],
                final["val/psnr"],
                final["val/psnr_bicubic"],
                final["val/psnr"] - final["val/psnr_bicubic"],
                final["val/ssim"],
                final["val/ssim_bicubic"],
                final.get("step_time_ms", 0),
                final.get("data_wait_ms", 0),
                100 * final.get("data_wait_share", 0),
            )
            if "val/ema_psnr" in final:
                log.info(
                    "final step %d, averaged weights (train.ema=%s): val PSNR %.2f dB (%+.2f dB "
                    "vs the trained weights), SSIM %.4f",
                    final["step"],
                    self.cfg.train.ema,
                    final["val/ema_psnr"],
                    final["val/ema_psnr"] - final["val/psnr"],
                    final["val/ema_ssim"],
                )
        elif "step_time_ms" in final:
            log.info(
                "final step %d: mean step %.1f ms, data-wait %.2f ms (%.1f%% of step time)",
                final["step"],
                final["step_time_ms"],
                final["data_wait_ms"],
                100 * final["data_wait_share"],
            )

    def hparams(self) -> dict:
        """The run's HParams: model, data, schedule, loss and optimizer choices."""
        c = self.cfg
        return {
            "model": describe_model(c.model),
            "parameters": int(self.model.count_params()),
            "data_mode": self.data_mode,
            "strategy": str(c.train.strategy),
            "replicas": int(self.replicas),
            "steps": int(c.train.steps),
            "steps_reached": self.state.at(),
            "max_minutes": float(c.train.max_minutes or 0.0),
            "batch_size": int(c.data.batch_size),
            "patch_size": int(c.data.patch_size),
            "scale": int(c.data.scale),
            "lr": float(c.train.lr),
            "lr_schedule": str(c.train.lr_schedule),
            "loss": self.loss.name,
            "loss_config": self.loss.describe(),
            "discriminator": self.part.describe(),
            "optimizer": self.optimizer_choice.name,
            "optimizer_config": self.optimizer_choice.describe(),
            "ema": float(c.train.get("ema") or 0.0),
            "clip_norm": float(c.train.clip_norm or 0.0),  # 0: no clipping
            "guard": bool(c.train.guard),
            "rollbacks": int(self.state.guard.rollbacks.numpy()),
            "lr_scale": float(self.state.guard.lr_scale.numpy()),  # after the rollbacks
        }

    def write_hparams(self, final: dict) -> None:
        from tensorboard.plugins.hparams import api as hp

        with self.writer.as_default(step=self.state.at()):
            hp.hparams(self.hparams(), trial_id=self.run_name)  # metrics: the val/ scalars
