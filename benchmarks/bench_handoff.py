"""How long ``next(iterator)`` takes: the floor of the training log's data-wait, and the
data-wait of the demo's pipeline beside a training step for each ``data.threads``.

    python benchmarks/bench_handoff.py [--pause-ms 24] [--steps 200]
    python benchmarks/bench_handoff.py --train [--threads 0 1] [--blocks 12] [--block 50]
    python benchmarks/bench_handoff.py --trainer [--rounds 4] [--steps 600] [--val-every N]
    python benchmarks/bench_handoff.py --trainer --sync [--rounds 4] [--steps 600]

Without ``--train``: calls ``next()`` on several pipelines, with the consumer pausing
``--pause-ms`` between calls and in a tight loop, and prints the mean time per call in ms. A
synthetic in-memory dataset (one batch repeated through a trivial ``map``) shows the cost that no
input pipeline can remove: handing a ready batch to Python and waking tf.data's threads.

``--train``: the default ``data=tfrecord`` pipeline of ``python train.py`` (the demo photos, batch
64) once per ``--threads`` value (``data.threads``; ``null``: the default), and with
``--no-slack`` once more per value without the slack of its last prefetch (tf.data's
``experimental_slack``, on in ``sr.data.pipeline``), each feeding one
training step of the default model (ESPCN, L1, Adam, in one ``tf.function``: the trainer's step
without its logging and guard) in this process; the variants take turns, ``--block`` steps each
after 20 of warm-up, for ``--blocks`` rounds, so that a load that drifts weighs on all of them
alike. Prints per variant the median over blocks of the data-wait (ms in ``next()`` per step),
the step time and the data-wait share, and for each variant after the first the median over
blocks of its share divided by the first's in the same round.

``--trainer``: the trainer itself (``sr.train.app.run``, the config of ``python train.py``, no
validation or checkpoint unless ``--val-every``), ``--rounds`` runs of ``--steps`` with the last
prefetch's slack on, then off, in turn, in this process, the slack turned off by wrapping
``sr.data.source.pairs_dataset`` (a study's hook, not an option of the project). The figures are
the training log's own: the data-wait and step time of its 100-step windows
(``sr.train.timing.StepTimer.close_window`` wrapped), the first window (the pipeline's start)
left out. Prints per round and variant the mean over windows and each window's wait, then the
median over rounds. ``--sync``: the same rounds with the slack on, the batch taken three ways:
inside the step's ``tf.function`` (``sr.train.step.TrainStep.take_and_train``, the default with
one replica), by ``sr.data.pipeline.handoff`` on the loop's thread before the step
(``IteratorGetNextSync``: the path of several replicas), and by ``next()`` before the step
(``IteratorGetNext``, handed over by one of tf.data's threads); the host's two by wrapping
``Trainer.take_step``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import hydra  # noqa: E402
import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from sr.config import build_source, compose  # noqa: E402
from sr.data.demo import ensure_demo  # noqa: E402
from sr.loading.models import build_model  # noqa: E402
from sr.train.app import run  # noqa: E402


def without_slack(ds: tf.data.Dataset) -> tf.data.Dataset:
    """``ds`` with ``experimental_slack`` off (the latest option set wins). Only for the variant
    without: an options stage after the last prefetch leaves that prefetch without its slack
    whatever the option says (measured: both variants then wait alike)."""
    options = tf.data.Options()
    options.experimental_slack = False
    return ds.with_options(options)


def wait_per_call(ds: tf.data.Dataset, steps: int, pause: float) -> float:
    """Mean seconds inside ``next()`` over ``steps`` calls, after 30 warm-up calls."""
    it = iter(ds)
    for _ in range(30):
        next(it)
        time.sleep(pause)
    total = 0.0
    for _ in range(steps):
        t0 = time.perf_counter()
        next(it)
        total += time.perf_counter() - t0
        if pause:
            time.sleep(pause)
    del it  # a generator-mode iterator must go before interpreter shutdown
    return total / steps


def handoff(args) -> None:
    """The ``next()`` table without a training step (module docstring)."""
    cfgs = {m: compose(f"data={m}", *args.overrides) for m in ("tfrecord", "generator")}
    ensure_demo(cfgs["tfrecord"].demo_dir)
    b, p, s = (cfgs["tfrecord"].data[k] for k in ("batch_size", "patch_size", "scale"))
    lr, hr = tf.random.uniform((b, p // s, p // s, 1)), tf.random.uniform((b, p, p, 1))
    synthetic = tf.data.Dataset.from_tensors((lr, hr)).repeat()
    pipelines = {
        "synthetic in-memory batch": synthetic.map(lambda a, c: (a + 0, c + 0)).prefetch(
            tf.data.AUTOTUNE
        ),
        **{f"data={m}": hydra.utils.instantiate(c.data).dataset() for m, c in cfgs.items()},
    }
    print(f"| pipeline | next() ms, {args.pause_ms:g} ms pause | next() ms, tight loop |")
    print("|---|---|---|")
    for name, ds in pipelines.items():
        paused = wait_per_call(ds, args.steps, args.pause_ms / 1e3)
        tight = wait_per_call(ds, args.steps, 0.0)
        print(f"| {name} | {1e3 * paused:.3f} | {1e3 * tight:.3f} |", flush=True)


def train_blocks(args) -> None:
    """The ``--train`` table (module docstring)."""
    variants = [(t, slack) for t in args.threads for slack in (True, False)[: 1 + args.no_slack]]
    cfgs = {t: compose(f"data.threads={t}", *args.overrides) for t in args.threads}
    ensure_demo(cfgs[args.threads[0]].demo_dir)
    model = build_model(cfgs[args.threads[0]])
    optimizer = keras.optimizers.Adam(1e-3)

    @tf.function
    def step(lr, hr):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.abs(model(lr, training=True) - hr))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    iterators = {}
    for t, slack in variants:
        source = build_source(cfgs[t])
        source.prepare()
        name = t if slack else f"{t}, no slack"
        ds = source.dataset()
        iterators[name] = iter(ds if slack else without_slack(ds))
    rows = {name: [] for name in iterators}  # (wait ms, step ms) per block
    for _ in range(args.blocks):
        for t, it in iterators.items():
            for _ in range(20):
                float(step(*next(it)))
            wait, start = 0.0, time.perf_counter()
            for _ in range(args.block):
                t0 = time.perf_counter()
                batch = next(it)
                wait += time.perf_counter() - t0
                loss = step(*batch)
            float(loss)  # the last step done
            rows[t].append(
                (1e3 * wait / args.block, 1e3 * (time.perf_counter() - start) / args.block)
            )
    first = next(iter(rows))
    print(f"CPU cores {len(os.sched_getaffinity(0))}; load average {os.getloadavg()}")
    print("| data.threads | data-wait ms | step ms | data-wait share | share / first's |")
    print("|---|---:|---:|---:|---:|")
    for t, r in rows.items():
        shares = [w / s for w, s in r]
        ratio = statistics.median(a / b for a, b in zip(shares, (w / s for w, s in rows[first])))
        wait, step_ms = statistics.median(w for w, _ in r), statistics.median(s for _, s in r)
        share = 100 * statistics.median(shares)
        print(f"| {t} | {wait:.3f} | {step_ms:.1f} | {share:.2f} % | {ratio:.2f} |")


def trainer_rounds(args) -> None:
    """The ``--trainer`` table (module docstring)."""
    import tempfile
    from pathlib import Path

    import sr.data.pipeline
    import sr.data.source
    from sr.train import loop, timing

    windows, variant = [], {"name": None}
    make, sync, fused = (
        sr.data.source.pairs_dataset,
        sr.data.pipeline.handoff,
        loop.Trainer.take_step,
    )
    close = timing.StepTimer.close_window
    names = (
        ["in the step's function (the default)", "IteratorGetNextSync before the step",
         "next() before the step"]
        if args.sync
        else ["with slack (the default)", "without slack"]
    )  # fmt: skip

    def pairs_dataset(*a, **k):  # without --sync: the second variant without the slack
        ds = make(*a, **k)
        return without_slack(ds) if not args.sync and variant["name"] == names[1] else ds

    def taken_by(iterator):  # the host's take: IteratorGetNextSync, or next()
        return (lambda: next(iterator)) if variant["name"] == names[-1] else sync(iterator)

    def take_step(self):  # --sync: the variants that take the batch on the host
        if variant["name"] == names[0] or not args.sync:
            return fused(self)
        start = time.perf_counter()
        batch = self.feed.take_batch()
        self.host_wait += time.perf_counter() - start
        return self.train_step(batch)

    def close_window(self):
        stats = close(self)
        if stats is not None:
            windows.append((stats.data_wait_ms, stats.step_time_ms))
        return stats

    sr.data.source.pairs_dataset, sr.data.pipeline.handoff = pairs_dataset, taken_by
    loop.Trainer.take_step, timing.StepTimer.close_window = take_step, close_window
    val = [f"train.val_every={args.val_every or 10**6}", "train.ckpt_every=1000000"]
    rows = {name: [] for name in names}
    for r in range(args.rounds):
        for name in names:
            variant["name"], windows[:] = name, []
            with tempfile.TemporaryDirectory() as tmp:
                run(compose(f"train.steps={args.steps}", "train.log_every=100", *val,
                            *args.overrides), Path(tmp) / "run")  # fmt: skip
            steady = windows[1:]  # the first window: the pipeline's start
            wait = statistics.mean(w for w, _ in steady)
            step_ms = statistics.mean(s for _, s in steady)
            rows[name].append((wait, step_ms))
            print(f"round {r} {name}: data-wait {wait:.3f} ms of {step_ms:.1f} ms "
                  f"({100 * wait / step_ms:.2f} %); windows "
                  f"{' '.join(f'{w:.2f}' for w, _ in steady)}", flush=True)  # fmt: skip
    print(f"CPU cores {len(os.sched_getaffinity(0))}; load average {os.getloadavg()}")
    what = "batch taken" if args.sync else "last prefetch"
    print(f"| {what} | data-wait ms | step ms | data-wait share |")
    print("|---|---:|---:|---:|")
    for name, r in rows.items():
        wait, ms = (statistics.median(x[i] for x in r) for i in range(2))
        share = 100 * statistics.median(x[0] / x[1] for x in r)
        print(f"| {name} | {wait:.3f} | {ms:.1f} | {share:.2f} % |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pause-ms", type=float, default=24.0, help="consumer pause per call")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--train", action="store_true", help="beside a training step")
    parser.add_argument("--threads", nargs="+", default=["0", "null"], help="data.threads")
    parser.add_argument("--no-slack", action="store_true", help="each also without slack")
    parser.add_argument("--blocks", type=int, default=12, help="rounds of the variants")
    parser.add_argument("--block", type=int, default=50, help="timed steps per block")
    parser.add_argument("--trainer", action="store_true", help="the trainer, slack on and off")
    parser.add_argument("--rounds", type=int, default=4, help="--trainer: rounds of the two")
    parser.add_argument("--val-every", type=int, help="--trainer: validate every N steps")
    parser.add_argument(
        "--sync", action="store_true", help="--trainer: the handoff against next(), not the slack"
    )
    parser.add_argument("overrides", nargs="*", help="Hydra overrides for the loaders")
    args = parser.parse_args(argv)
    if args.trainer:
        args.steps = args.steps if args.steps != 200 else 600
        trainer_rounds(args)
    else:
        train_blocks(args) if args.train else handoff(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
