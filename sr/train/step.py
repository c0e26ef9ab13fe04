"""The training step: the loss of a batch, its gradients (clipped to ``train.clip_norm``) and the
optimizer update, run on every replica of the ``tf.distribute`` strategy, with the device-side
non-finite check and the loss window the divergence guard reads (:mod:`sr.train.window`).

A step takes a named batch (``sr.core.batch.Batch`` or ``SharpenedBatch``) and reads its fields
by name: ``lq`` the model's input, ``gt`` (or a term's target) the HR."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import keras
import tensorflow as tf

from sr.core.batch import Batch, SharpenedBatch, check_batch
from sr.train.window import LossWindow, terms_window


def all_finite(variables) -> tf.Tensor:
    """bool scalar: every float value of ``variables`` is finite (one reduction per variable)."""
    checks = [
        tf.reduce_all(tf.math.is_finite(v)) for v in variables if tf.as_dtype(v.dtype).is_floating
    ]
    return tf.reduce_all(tf.stack(checks)) if checks else tf.constant(True)


def clip_by_global_norm(grads, clip_norm: float, unscale: tf.Tensor):
    """Scale one replica's gradients so that the global L2 norm of the summed gradient (all
    variables together, summed over the replicas, divided by ``unscale``: the loss scale under
    mixed precision, else 1) is at most ``clip_norm`` (Pascanu et al. 2013, "On the difficulty
    of training recurrent neural networks"; as ``tf.clip_by_global_norm``). Every replica
    computes the same factor from the all-reduced gradients, so the optimizer's own sum over the
    replicas is the clipped gradient under every strategy. A non-finite norm gives NaN
    gradients, which the non-finite check (or the loss scale) then handles."""
    context = tf.distribute.get_replica_context()
    total = grads
    if context is not None and context.num_replicas_in_sync > 1:  # one extra all-reduce
        total = context.all_reduce(tf.distribute.ReduceOp.SUM, list(grads))
    clipped, _ = tf.clip_by_global_norm(
        grads, clip_norm, use_norm=tf.linalg.global_norm(total) / unscale
    )
    return clipped


class TrainStep:
    """One optimizer step on a (distributed) batch: ``train_step(batch)`` (a ``tf.function``),
    ``batch`` an ``sr.core.batch.Batch`` (or what ``prepare`` makes one from); or, with one
    replica, ``take_and_train(iterator)``, which takes the batch itself and times the take
    (:attr:`data_wait`).

    Args:
        model: the Keras model being trained.
        optimizer: its optimizer (built).
        loss: the run's :class:`sr.losses.Loss` (its terms, each per-example values ``[B]``);
            read when the step is traced, so it may be replaced before the first step. With
            more than one term the step records each (its ``window`` made with the part's
            ``terms``, :meth:`record`).
        strategy: the ``tf.distribute`` strategy.
        global_batch: ``data.batch_size``, split over the replicas.
        counters: ``(step, first_bad, skipped)`` int64 variables: the step count; the first step
            whose loss was NaN or inf (-1: none; ``train.on_nonfinite=stop``); the steps
            skipped (``skip``).
        skip_nonfinite: ``train.on_nonfinite=skip``.
        xla: ``train.xla``.
        clip_norm: ``train.clip_norm`` (global norm of the gradient; None: no clipping).
        window: the :class:`sr.train.window.LossWindow` the step records its loss in (None:
            none).
        prepare: the part of the pair stage that runs on the model's device (the source's
            ``device_stage()``: a batch of the input pipeline to a ``Batch``, run on every
            replica before its step, outside XLA: its shapes depend on random draws), or None
            when the input pipeline yields the ``Batch``.
    """

    def __init__(
        self,
        model: keras.Model,
        optimizer,
        loss,
        strategy: tf.distribute.Strategy,
        global_batch: int,
        counters: tuple[tf.Variable, tf.Variable, tf.Variable],
        skip_nonfinite: bool = False,
        xla: bool = False,
        clip_norm: float | None = None,
        window: LossWindow | None = None,
        prepare=None,
    ):
        self.model, self.optimizer, self.loss, self.strategy = model, optimizer, loss, strategy
        self.prepare = prepare
        self.global_batch, self.skip_nonfinite = int(global_batch), skip_nonfinite
        self.clip_norm, self.window = clip_norm, window
        if self.recorded_terms():  # the window records them (made here if None)
            self.window = terms_window(window, self.recorded_terms(), not skip_nonfinite)
        self.step, self.first_bad, self.skipped = counters
        # XLA compiles the replica step (as Keras does), the strategy runs it on every replica;
        # with several replicas only its forward and backward pass: the optimizer's
        # cross-replica update cannot be in an XLA cluster (its variables live on every
        # replica's device)
        several = strategy.num_replicas_in_sync > 1
        # autograph=False: the step's Python branches on settings, never on tensors (its
        # data-dependent choices are tf.cond/tf.where), so converting its source (about 2.4 s of
        # each run's start on a 2-core EPYC, 11 functions) bought nothing; a branch on a tensor
        # would now fail at the first trace, naming the line
        self.gradients = (
            tf.function(self._gradients, jit_compile=True, autograph=False)
            if xla and several
            else self._gradients
        )
        self.replica_step = tf.function(
            self._replica_step, jit_compile=xla and not several, autograph=False
        )
        self.train_step = tf.function(self._train_step, autograph=False)
        # seconds the steps of take_and_train waited for their batch, summed on the host (the
        # training log's data-wait; tf.timestamp runs on the CPU)
        with tf.device("/CPU:0"):
            self.data_wait = tf.Variable(0.0, dtype=tf.float64, trainable=False, name="wait")
        self.take_and_train = tf.function(self._take_and_train, autograph=False)

    def recorded_terms(self) -> tuple[str, ...]:
        """The names of the terms the step records beside its loss: the loss's terms when it
        has more than one (``()``: the loss alone)."""
        names = tuple(self.loss.names)
        return names if len(names) > 1 else ()

    def share(self, per_example: tf.Tensor) -> tf.Tensor:
        """One replica's share of a term's batch mean: its per-example values ``[B]`` summed
        and divided by the global batch (``tf.nn.compute_average_loss``)."""
        return tf.nn.compute_average_loss(per_example, global_batch_size=self.global_batch)

    def content_terms(self, batch: Batch | SharpenedBatch, sr: tf.Tensor, terms) -> list:
        """Each of ``terms`` (:class:`sr.losses.base.Term`) of ``sr`` against its target
        (``batch.target(term.usm)``), as this replica's share of its batch mean, unweighted."""
        return [
            self.share(term(tf.cast(batch.target(term.usm), tf.float32), sr)) for term in terms
        ]

    def _gradients(self, batch: Batch | SharpenedBatch):
        """Forward and backward pass of one replica on its ``batch``: its share of the loss,
        ``sum_k weight_k term_k`` over the loss's terms in their order (with more than one term,
        ``[loss, term_1, ...]`` float32, the terms unweighted), and the gradients of the
        (scaled) loss."""
        variables = self.model.trainable_variables
        terms = self.loss.terms
        with tf.GradientTape() as tape:
            sr = tf.cast(self.model(batch.lq, training=True), tf.float32)  # the loss in float32
            values = self.content_terms(batch, sr, terms)
            loss = terms[0].weight * values[0]
            for term, value in zip(terms[1:], values[1:]):
                loss += term.weight * value
            scaled = self.optimizer.scale_loss(loss)
        grads = tape.gradient(scaled, variables)
        return (tf.stack([loss, *values]) if len(terms) > 1 else loss), grads

    def _replica_step(self, batch: Batch | SharpenedBatch):
        """One replica's share of a step on its ``batch``: forward, backward, and the optimizer
        update (Keras sums the gradients over the replicas); returns its share of the loss and
        whether the step is finite on every replica (float32 1 or 0; always 1 with
        ``on_nonfinite=stop``). The loss may be a vector of terms (a subclass's
        :meth:`_gradients`), which :meth:`record` reduces to the one the loop logs."""
        variables = self.model.trainable_variables
        loss, grads = self.gradients(batch)
        if self.clip_norm is not None:
            unscale = tf.cast(self.optimizer.scale_loss(tf.constant(1.0)), tf.float32)
            grads = clip_by_global_norm(grads, float(self.clip_norm), unscale)
        if not self.skip_nonfinite:
            self.optimizer.apply(grads, variables)
            return loss, tf.constant(1.0)
        finite = tf.logical_and(
            tf.reduce_all(tf.math.is_finite(loss)), all_finite(g for g in grads if g is not None)
        )
        context = tf.distribute.get_replica_context()  # replicas with a non-finite step
        bad = context.all_reduce(tf.distribute.ReduceOp.SUM, 1.0 - tf.cast(finite, tf.float32))

        def update():
            self.optimizer.apply(grads, variables)
            return tf.constant(0.0)

        tf.cond(bad == 0, update, lambda: tf.constant(0.0))
        return loss, tf.cast(bad == 0, tf.float32)

    def record(self, loss: tf.Tensor) -> tf.Tensor:
        """Record the step's loss (summed over the replicas) in the guard's window, and with
        more than one term each term; returns the loss the loop logs and the guard judges."""
        if loss.shape.rank:  # [loss, term_1, ...]
            self.window.add(loss[0], loss[1:])
            return loss[0]
        if self.window is not None:
            self.window.add(loss)
        return loss

    def _train_step(self, batch):
        """One optimizer step on a (distributed) ``sr.core.batch.Batch`` (``lq``, ``gt``):
        float32 ``[B, h, w, C]`` and ``[B, s h, s w, C]`` in [0, 1] (or what ``prepare`` makes
        it from), B the global batch split over the replicas; returns the loss (the mean over
        the global batch), a float32 scalar.

        The non-finite check runs inside this ``tf.function``, with no host sync:

        - ``train.on_nonfinite=stop``: ``tf.math.is_finite(loss)`` (one op on a scalar) and a
          scalar ``tf.where`` into ``first_bad``, the first step whose loss was NaN or inf. The
          host reads it with the loss every ``train.log_every`` steps and before each save, so a
          NaN stops the run within ``log_every`` steps. Cost: not measurable; ESPCN on a shared
          2-core CPU, 300 interleaved steps each, median step 36.8 ms with the check vs 37.6 ms
          without at batch 16, 12.2 vs 13.2 ms at batch 4 (differences within the noise, sd
          about 2 ms).
        - ``train.on_nonfinite=skip``: also ``tf.math.is_finite`` over every gradient (one pass
          over the parameters) and the update under ``tf.cond``: a step with a non-finite loss or
          gradient applies nothing and adds 1 to ``skipped`` (as loss scaling does). Cost also
          within the noise: 28.7 vs 30.8 ms (batch 16), 12.2 vs 12.5 ms (batch 4).

        Raises:
            TypeError: ``batch`` (after ``prepare``) is not an ``sr.core.batch`` structure (a
                plain tuple), when the step is traced, before any update.
        """
        if self.prepare is not None:
            batch = self.strategy.run(self.prepare, args=tuple(batch))
        check_batch(batch)
        losses, finite = self.strategy.run(self.replica_step, args=(batch,))
        sum_ = tf.distribute.ReduceOp.SUM
        loss = self.record(self.strategy.reduce(sum_, losses, axis=None))
        self.step.assign_add(1)
        if self.skip_nonfinite:  # the same on every replica: all skip, or none
            ok = self.strategy.experimental_local_results(finite)[0]
            self.skipped.assign_add(tf.cast(ok <= 0, tf.int64))
        else:
            known = tf.logical_or(tf.math.is_finite(loss), self.first_bad >= 0)
            self.first_bad.assign(tf.where(known, self.first_bad, self.step))
        return loss

    def _take_and_train(self, iterator):
        """One step of :meth:`_train_step` on the next batch of ``iterator`` (a tf.data
        iterator of ``sr.core.batch`` structures, one replica's batch), taken inside this
        ``tf.function``, as Keras's ``train_function(iterator)`` takes it: the loop makes one
        call a step instead of two (the take, then the step), and the batch is not handed back
        to Python between them. The time the take blocks (``tf.timestamp`` before and after
        it, in seconds) is added to :attr:`data_wait`, which the loop reads at each log window
        (no host sync per step); returns the loss, as :meth:`_train_step`.

        Raises:
            tf.errors.OutOfRangeError: the iterator is exhausted (nothing trained).
            tf.errors.DataLossError: a corrupt record (nothing trained).
        """
        start = tf.timestamp()
        with tf.control_dependencies([start]):
            batch = iterator.get_next()
        with tf.control_dependencies(tf.nest.flatten(batch)):
            taken = tf.timestamp()
        with tf.control_dependencies([taken]):  # nothing of the step before its batch is taken
            self.data_wait.assign_add(taken - start)
            return self._train_step(batch)


@dataclass(frozen=True, kw_only=True)
class StepArgs:
    """The arguments of a run's step, by keyword (their meaning: :class:`TrainStep`'s Args),
    which the trainer gives every part's ``make_step``: declared once here, so that a missing or
    misspelled one fails when it is made (``TypeError``)."""

    model: keras.Model
    optimizer: Any
    loss: Any
    strategy: tf.distribute.Strategy
    global_batch: int
    counters: tuple[tf.Variable, tf.Variable, tf.Variable]
    skip_nonfinite: bool = False
    xla: bool = False
    clip_norm: float | None = None
    window: LossWindow | None = None
    prepare: Any = None

    def build(self, step_class: type, **extra) -> TrainStep:
        """``step_class`` (:class:`TrainStep` or a subclass) of these arguments and ``extra``
        (a subclass's own keywords)."""
        return step_class(
            self.model, self.optimizer, self.loss, self.strategy, self.global_batch,
            self.counters, skip_nonfinite=self.skip_nonfinite, xla=self.xla,
            clip_norm=self.clip_norm, window=self.window, prepare=self.prepare, **extra,
        )  # fmt: skip
