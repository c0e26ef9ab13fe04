"""Which validation score chooses ``checkpoints/best``, and in which direction: a ``(monitor,
mode)`` pair as Keras's and Lightning's ``ModelCheckpoint(monitor=..., mode=...)``, in one
place. A way of training (``sr.train.parts``) names its rule (``part.best``);
:class:`BestCheckpoint` reads the monitored score from the validation results and compares by
the mode, never by the metric's name, and keeps ``checkpoints/best``."""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path

import tensorflow as tf

from sr.loading.checkpoints import BEST_RECORD, read_best
from sr.train import distribute

log = logging.getLogger("sr.train.loop")  # beside the timing lines in train.log


@dataclass(frozen=True)
class BestRule:
    """``monitor``: the validation score (``psnr`` in dB, ``niqe``); ``mode``: ``max`` (higher
    is better) or ``min``."""

    monitor: str
    mode: str

    def __post_init__(self):
        if self.mode not in ("max", "min"):
            raise ValueError(f"a best rule's mode is max or min, got {self.mode!r}")

    def score(self, value: float) -> float:
        """``value`` as a score where higher is better (NaN stays NaN: never better)."""
        return value if self.mode == "max" else -value

    @property
    def worst(self) -> float:
        """The score below every value: no best yet."""
        return -math.inf


PSNR = BestRule("psnr", "max")  # the pixel losses: the highest validation PSNR
NIQE = BestRule("niqe", "min")  # a GAN or a perceptual term: the lowest NIQE of the SR


class BestCheckpoint:
    """``checkpoints/best``: one checkpoint outside the rotation, the best validation so far by
    ``rule``, with ``best.json`` beside it (``sr.loading.checkpoints.read_best`` reads it).

    Args:
        checkpoint: the run's whole checkpoint (``sr.loading.checkpoints.make_checkpoint``).
        directory: its folder (``<checkpoints>/best``; a worker's temporary one off the chief).
        rule: the way of training's rule (``part.best``).
        step: int64 variable, the run's step.
        finite: the non-finite check (:class:`sr.train.saving.FiniteCheck`), made before saving.
        cluster: the run's workers (:class:`sr.train.cluster.Cluster`): every worker saves (a
            collective), the chief keeps it.
        averaged: the validation scores the averaged weights (``train.ema``): the ``ema_``
            results choose.
        chief: this process is the chief.

    Attributes:
        score: the best score so far (higher is better; -inf: none).
    """

    def __init__(self, checkpoint, directory, rule: BestRule, step, finite, cluster, *,
                 averaged: bool, chief: bool):  # fmt: skip
        self.manager = tf.train.CheckpointManager(checkpoint, str(directory), max_to_keep=1)
        self.rule, self.step, self.finite, self.cluster = rule, step, finite, cluster
        self.averaged, self.chief = averaged, chief
        self.score = rule.worst

    def keep(self, res: dict) -> None:
        """Save ``checkpoints/best`` when the validation ``res`` (``sr.train.validation``'s
        results) is the best so far by :attr:`rule` (of the averaged weights with ``train.ema``,
        as evaluate.py scores by default), with ``best.json`` beside it."""
        rule = self.rule
        metric = rule.monitor
        key = f"ema_{metric}" if self.averaged else metric
        value = res.get(key, math.nan) if res else math.nan
        score = rule.score(value)  # higher is better
        better = score > self.score  # False for NaN
        if self.cluster.several:
            better = self.cluster.any(better)
        if not better:
            return
        self.finite.check(weights=True)
        step = int(self.step.numpy())
        path = self.manager.save(checkpoint_number=step)
        distribute.discard(self.manager.directory)
        if not self.chief:
            return
        self.score = score
        psnr_key = "ema_psnr" if self.averaged else "psnr"
        record = {
            "step": step,
            "metric": metric,
            "mode": rule.mode,
            metric: value,
            "psnr": res[psnr_key],
            "weights": "ema" if self.averaged else "live",
            "live_psnr": res["psnr"],
            "checkpoint": Path(path).name,
        }
        tmp = Path(self.manager.directory) / (BEST_RECORD + ".tmp")
        tmp.write_text(json.dumps(record, indent=1) + "\n")
        tmp.replace(Path(self.manager.directory) / BEST_RECORD)  # atomic
        unit = " dB" if metric == "psnr" else ""
        log.info("best checkpoint so far: %s (%s %.3f%s, %s weights)", path, metric.upper(),
                 value, unit, record["weights"])  # fmt: skip

    def resume(self, run_dir) -> float | None:
        """On a resume: the best score so far from ``<run_dir>/checkpoints/best/best.json``, so
        that only a better validation replaces ``checkpoints/best``; returns its validation PSNR
        of the trained weights (dB, the guard's reference), None without a record."""
        record = read_best(run_dir)
        if record is None:
            return None
        metric = record.get("metric", "psnr")  # runs saved before GAN runs: PSNR
        value = float(record.get(metric, record["psnr"]))
        # the record's own rule (saved since the mode was), else the part's of its metric
        mode = record.get("mode") or (self.rule.mode if metric == self.rule.monitor
                                      else PSNR.mode)  # fmt: skip
        self.score = BestRule(metric, mode).score(value)
        return float(record.get("live_psnr", record["psnr"]))
