"""Why a restored tf.data iterator runs without the last prefetch's slack
(``sr.data.pipeline.pairs_dataset``, ``slack=False``): a prefetch with tf.data's
``experimental_slack``, saved after 5 batches and restored, stops producing once the restored
batches are taken; without the slack it goes on.

    python benchmarks/slack_restore.py [--batches 20] [--wait 10]

For each setting, ``--runs`` fresh processes (as a resumed run is) each take ``--batches``
batches from the restored iterator on a second thread; prints how many each got within
``--wait`` seconds, and in how many processes it stalled. TensorFlow 2.21 restores the prefetched
batches without the time each was made (``prefetch_dataset_op.cc``: ``RestoreBuffer`` leaves
``created_us`` unset), and the slack sleeps a fifth of the time since then before making the
next one. The stalled thread cannot be stopped, so each process is killed once it has printed. The
value left in ``created_us`` is whatever the memory held, so a stall is likely, not certain.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402


def pipeline(slack: bool) -> tf.data.Dataset:
    """Batches of 64 x 96 x 96 float32, the last prefetch with or without slack."""
    ds = tf.data.Dataset.range(10**6).map(lambda x: tf.fill([64, 96, 96], tf.cast(x, tf.float32)))
    options = tf.data.Options()
    options.experimental_slack = slack
    return ds.with_options(options).prefetch(tf.data.AUTOTUNE)


def restored_batches(slack: bool, batches: int, wait: float) -> int:
    """How many batches a restored iterator gives within ``wait`` seconds (of ``batches``)."""
    first = iter(pipeline(slack))
    for _ in range(5):
        next(first)
    time.sleep(0.5)  # the prefetch buffer fills
    path = tf.train.Checkpoint(iterator=first).write(tempfile.mkdtemp() + "/ckpt")
    restored = iter(pipeline(slack))
    tf.train.Checkpoint(iterator=restored).read(path)
    got = []

    def take():
        for _ in range(batches):
            next(restored)
            got.append(1)

    threading.Thread(target=take, daemon=True).start()
    deadline = time.monotonic() + wait
    while len(got) < batches and time.monotonic() < deadline:
        time.sleep(0.05)
    return len(got)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--wait", type=float, default=10.0)
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per setting")
    parser.add_argument("--one", choices=("on", "off"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:  # one setting in this process: print the count (the parent then kills it)
        print(restored_batches(args.one == "on", args.batches, args.wait), flush=True)
        return
    print(f"TensorFlow {tf.__version__}")
    for setting in ("on", "off"):
        counts = []
        for _ in range(args.runs):  # a fresh process each, as a resumed run is
            cmd = [sys.executable, __file__, "--one", setting, "--batches", str(args.batches),
                   "--wait", str(args.wait)]  # fmt: skip
            # a stalled prefetch thread keeps the process from exiting: read its count, kill it
            with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) as child:
                line = child.stdout.readline()
                child.kill()
            counts.append(int(line))
        stalled = sum(n < args.batches for n in counts)
        print(
            f"slack {setting}: stalled in {stalled} of {args.runs} processes; batches from the "
            f"restored iterator within {args.wait:g} s: {counts} of {args.batches}",
            flush=True,
        )


if __name__ == "__main__":
    main()
