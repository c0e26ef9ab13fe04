"""The training loop: Adam on L1 (or L2), a learning-rate schedule, a ``tf.function`` step (XLA by
config), per-step timing, validation, TensorBoard, checkpoints, resume and clean interruption."""

from __future__ import annotations

import logging
import signal
import time
from contextlib import contextmanager
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf
from omegaconf import DictConfig

from sr.evaluation import evaluate_images
from sr.train.checkpoint import make_checkpoint, make_manager
from sr.train.timing import StepTimer

log = logging.getLogger(__name__)

LOSSES = {
    "l1": lambda hr, sr: tf.reduce_mean(tf.abs(hr - sr)),
    "l2": lambda hr, sr: tf.reduce_mean(tf.square(hr - sr)),
}


def gpu_available() -> bool:
    return bool(tf.config.list_physical_devices("GPU"))


def setup_precision(mixed_precision: bool) -> bool:
    """Set Keras' global dtype policy before the model is built; returns True if mixed float16
    is on. Mixed precision is used only on a GPU (on CPU float16 is slower, so it is ignored)."""
    if mixed_precision and gpu_available():
        keras.mixed_precision.set_global_policy("mixed_float16")
        return True
    if mixed_precision:
        log.warning("train.mixed_precision=true ignored: no GPU visible to TensorFlow")
    keras.mixed_precision.set_global_policy("float32")
    return False


def make_schedule(cfg: DictConfig):
    """Learning rate per step: ``cosine`` (to 1 % of ``lr`` at ``steps``, optional linear warm-up),
    ``step`` (halved every ``lr_decay_steps``, as EDSR), or ``constant``."""
    t = cfg.train
    if t.lr_schedule == "cosine":
        warm = int(t.lr_warmup_steps)
        return keras.optimizers.schedules.CosineDecay(
            t.lr if not warm else 0.0,
            max(1, t.steps - warm),
            alpha=0.01,
            warmup_target=t.lr if warm else None,
            warmup_steps=warm,
        )
    if t.lr_schedule == "step":
        return keras.optimizers.schedules.ExponentialDecay(
            t.lr, t.lr_decay_steps, 0.5, staircase=True
        )
    if t.lr_schedule == "constant":
        return float(t.lr)
    raise ValueError(f"train.lr_schedule must be cosine, step or constant, got {t.lr_schedule!r}")


def make_optimizer(cfg: DictConfig, mixed: bool) -> keras.optimizers.Optimizer:
    opt = keras.optimizers.Adam(
        make_schedule(cfg), beta_1=cfg.train.beta_1, beta_2=cfg.train.beta_2
    )
    return keras.optimizers.LossScaleOptimizer(opt) if mixed else opt


def current_lr(optimizer) -> float:
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    lr = inner.learning_rate
    return float(lr(inner.iterations) if callable(lr) else lr)


@contextmanager
def stop_signals():
    """Turn SIGINT (Ctrl-C) and SIGTERM into a flag the loop checks, so that it can save a
    checkpoint before exiting. Yields a dict whose ``"signal"`` is set on arrival."""
    state = {"signal": None}

    def handler(signum, frame):
        if state["signal"] is not None:  # second Ctrl-C: give up at once
            raise KeyboardInterrupt
        state["signal"] = signum
        log.warning("%s received: saving a checkpoint and stopping", signal.Signals(signum).name)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield state
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def side_by_side(*images: np.ndarray) -> np.ndarray:
    """``[1, H, k W, 1]`` float32 in [0, 1] from k ``[H, W]`` images on the [0, 255] scale."""
    row = np.concatenate([np.clip(im, 0, 255) / 255.0 for im in images], axis=1)
    return row[np.newaxis, :, :, np.newaxis].astype(np.float32)


def describe_model(model_cfg) -> str:
    """``build_edsr(blocks=8, features=32, ...)``: the builder and its configured arguments, which
    tell apart models of one builder (``edsr_baseline`` and ``edsr_lite``) in HParams."""
    args = ", ".join(f"{k}={v}" for k, v in model_cfg.items() if k != "_target_")
    return f"{str(model_cfg._target_).rsplit('.', 1)[-1]}({args})"


class Trainer:
    """Trains ``model`` on ``loader.dataset()`` and writes everything under ``run_dir``.

    Args:
        cfg: the composed config (``train``, ``data``, ``model`` groups).
        loader: a prepared data source (:class:`sr.data.PatchSource`): its ``dataset()`` feeds
            the loop, its ``val_files`` are the validation images.
        model: Keras model ``[B, h, w, 1] -> [B, s h, s w, 1]``.
        run_dir: the run's output directory (checkpoints/, tb/).
        mixed: mixed float16 is on (``setup_precision``).
    """

    def __init__(self, cfg: DictConfig, loader, model: keras.Model, run_dir, mixed: bool = False):
        if cfg.train.loss not in LOSSES:
            raise ValueError(f"train.loss must be one of {sorted(LOSSES)}, got {cfg.train.loss!r}")
        self.cfg, self.loader, self.model = cfg, loader, model
        self.run_dir = Path(run_dir)
        self.optimizer = make_optimizer(cfg, mixed)
        self.optimizer.build(model.trainable_variables)
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
        self.checkpoint = make_checkpoint(model, self.optimizer, self.step)
        self.manager = make_manager(self.checkpoint, self.run_dir, cfg.train.max_to_keep)
        self.writer = tf.summary.create_file_writer(str(self.run_dir / "tb"))
        self.val_files = loader.val_files
        self.loss_fn = LOSSES[cfg.train.loss]
        self.train_step = tf.function(self._train_step, jit_compile=bool(cfg.train.xla))
        self.final: dict = {}

    def _train_step(self, lr, hr):
        with tf.GradientTape() as tape:
            sr = self.model(lr, training=True)
            loss = self.loss_fn(hr, tf.cast(sr, hr.dtype))
            scaled = self.optimizer.scale_loss(loss)
        grads = tape.gradient(scaled, self.model.trainable_variables)
        self.optimizer.apply(grads, self.model.trainable_variables)
        self.step.assign_add(1)
        return loss

    def restore(self) -> int:
        """Restore the latest checkpoint of ``run_dir`` (for ``resume=``); returns its step.

        Raises:
            FileNotFoundError: if the run has no checkpoint.
        """
        if self.manager.latest_checkpoint is None:
            raise FileNotFoundError(
                f"resume={self.run_dir}: no checkpoint in {self.run_dir / 'checkpoints'}; "
                "pass the output directory of an earlier train.py run"
            )
        self.checkpoint.restore(self.manager.latest_checkpoint).assert_existing_objects_matched()
        log.info("resumed from %s at step %d", self.manager.latest_checkpoint, int(self.step))
        return int(self.step)

    def save(self) -> str:
        path = self.manager.save(checkpoint_number=int(self.step))
        log.info("checkpoint %s", path)
        return path

    def validate(self) -> dict:
        """PSNR/SSIM on Y of ``data.val_dir`` (paper protocol) with the bicubic baseline, logged to
        the console and TensorBoard (scalars and bicubic | SR | HR panels)."""
        if not self.val_files:
            return {}
        t0 = time.perf_counter()
        res = evaluate_images(
            self.model, self.val_files, self.cfg.data.scale, keep=self.cfg.train.val_images
        )
        step = int(self.step)
        with self.writer.as_default(step=step):
            for key in ("psnr", "ssim", "psnr_bicubic", "ssim_bicubic"):
                tf.summary.scalar(f"val/{key}", res[key])
            for name, bicubic, sr, hr in res["panels"]:
                tf.summary.image(
                    f"val/{Path(name).stem} (bicubic | SR | HR)", side_by_side(bicubic, sr, hr)
                )
        log.info(
            "validation step %d on %d images: PSNR %.2f dB (bicubic %.2f dB), SSIM %.4f "
            "(bicubic %.4f) [%.1f s]",
            step,
            res["n"],
            res["psnr"],
            res["psnr_bicubic"],
            res["ssim"],
            res["ssim_bicubic"],
            time.perf_counter() - t0,
        )
        return res

    def _log_window(self, timer: StepTimer, loss: float) -> None:
        stats = timer.close_window()
        if stats is None:
            return
        lr = current_lr(self.optimizer)
        log.info(
            "[%s] step %d/%d  loss %.5f  step %.1f ms  data-wait %.2f ms (%.1f%%)  "
            "%.0f patches/s  lr %.2e",
            timer.elapsed(),
            int(self.step),
            self.cfg.train.steps,
            loss,
            stats.step_time_ms,
            stats.data_wait_ms,
            100 * stats.data_wait_share,
            stats.patches_per_sec,
            lr,
        )
        with self.writer.as_default(step=int(self.step)):
            tf.summary.scalar("train/loss", loss)
            tf.summary.scalar("train/step_time_ms", stats.step_time_ms)
            tf.summary.scalar("train/data_wait_ms", stats.data_wait_ms)
            tf.summary.scalar("train/patches_per_sec", stats.patches_per_sec)
            tf.summary.scalar("train/lr", lr)

    def fit(self) -> dict:
        """Train until ``train.steps`` (or a stop signal); validate, checkpoint, log.

        Returns:
            ``{"step", "val/psnr", "val/psnr_bicubic", "val/ssim", "step_time_ms",
            "data_wait_ms", "data_wait_share", "interrupted"}`` (val keys only with a val_dir).
        """
        t = self.cfg.train
        timer = StepTimer(self.cfg.data.batch_size)
        iterator = iter(self.loader.dataset())
        interrupted = None
        log.info(
            "training %s for %d steps from step %d (data=%s, batch %d, device %s)",
            self.model.name,
            t.steps,
            int(self.step),
            self.loader.mode,
            self.cfg.data.batch_size,
            "GPU" if gpu_available() else "CPU",
        )
        try:
            with stop_signals() as stop:
                timer.resume()
                budget = 60.0 * t.max_minutes if t.max_minutes else float("inf")
                # A Python step counter: reading the step variable every step would block the
                # host on the device each step and stop dispatch from running ahead on a GPU.
                step, loss = int(self.step), None
                while step < t.steps and stop["signal"] is None:
                    if time.perf_counter() - timer.start > budget:
                        log.info(
                            "time budget of %s minutes reached at step %d", t.max_minutes, step
                        )
                        break
                    t0 = time.perf_counter()
                    lr, hr = next(iterator)
                    timer.add_wait(time.perf_counter() - t0)
                    loss = self.train_step(lr, hr)
                    step += 1
                    if step % t.log_every == 0:
                        self._log_window(timer, float(loss))
                    if step % t.val_every == 0 and step < t.steps:
                        timer.close_window()
                        self.validate()
                        timer.resume()
                    if step % t.ckpt_every == 0 and step < t.steps:
                        timer.close_window()
                        self.save()
                        timer.resume()
                interrupted = stop["signal"]
                if loss is not None and step % t.log_every:
                    self._log_window(timer, float(loss))
                self.save()
        finally:
            del iterator  # a generator-mode iterator must go before interpreter shutdown
        if interrupted is not None:
            log.warning(
                "stopped by %s at step %d; resume with resume=%s",
                signal.Signals(interrupted).name,
                int(self.step),
                self.run_dir,
            )
        res = {} if interrupted is not None else self.validate()
        return self._finish(timer, res, interrupted)

    def _finish(self, timer: StepTimer, res: dict, interrupted) -> dict:
        summary = timer.summary()
        final = {"step": int(self.step), "interrupted": interrupted}
        if summary:
            final.update(
                step_time_ms=summary.step_time_ms,
                data_wait_ms=summary.data_wait_ms,
                data_wait_share=summary.data_wait_share,
                patches_per_sec=summary.patches_per_sec,
            )
        for key in ("psnr", "ssim", "psnr_bicubic", "ssim_bicubic"):
            if key in res:
                final[f"val/{key}"] = res[key]
        self._write_hparams(final)
        self.writer.flush()
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
        self.final = final
        return final

    def _write_hparams(self, final: dict) -> None:
        from tensorboard.plugins.hparams import api as hp

        c = self.cfg
        hparams = {
            "model": describe_model(c.model),
            "parameters": int(self.model.count_params()),
            "data_mode": self.loader.mode,
            "steps": int(c.train.steps),
            "batch_size": int(c.data.batch_size),
            "patch_size": int(c.data.patch_size),
            "scale": int(c.data.scale),
            "lr": float(c.train.lr),
            "lr_schedule": str(c.train.lr_schedule),
            "loss": str(c.train.loss),
        }
        with self.writer.as_default(step=int(self.step)):
            hp.hparams(hparams, trial_id=self.run_dir.name)  # metrics: the val/ scalars
