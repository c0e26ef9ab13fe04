"""How diverse are the degradation draws within a training batch, with and without Real-ESRGAN's
training-pair pool (``degradation.pool_size``)?

Real-ESRGAN's degradation draws the resize factors and modes, the noise kinds, the second blur's
flag and the final order once per batch (``feed_data``), as ``sr.degradations.realesrgan`` does:
without a pool all pairs of a batch share them. The pool (``sr.data.pair_pool``, the official
``_dequeue_and_enqueue``) mixes pairs across batches. This follows the pool of the real stream
(the same shuffles, keyed by each batch's first degradation seed) on labels only, no pixels: for
each batch trained on, the batches its pairs were degraded in, and those batches' per-batch
draws (``sr.degradations.realesrgan.batch_draws``, read in the order ``degrade_batch`` takes
them: first resize kind, up factor, down factor, mode; first noise kind; second blur; second
resize kind, up, down, mode; second noise kind; final order and mode). Per batch: how many
distinct draws (source batches) it holds, and how many of the 3 first-resize kinds (up, down,
keep), 3 first-resize modes (area, bilinear, bicubic), 2 first-noise kinds (Gaussian,
Poisson), 3 x 3 first-resize (kind, mode) pairs and 2 final orders; means over the batches
after the pool has filled.

    python benchmarks/pool_diversity.py

prints the table of docs/data.md ("The training-pair pool").
"""

from __future__ import annotations

import argparse

import numpy as np

from sr.core.quiet import quiet_tensorflow  # noqa: E402

quiet_tensorflow()

import tensorflow as tf  # noqa: E402

from sr.data.pair_pool import empty_pool, fill_batches, pool_key, pool_step  # noqa: E402
from sr.degradations.realesrgan import Params, batch_draws, image_seed  # noqa: E402

# positions of the per-batch uniforms that degrade_batch takes, in its order
RESIZE_KIND, RESIZE_MODE, NOISE_KIND, FINAL_ORDER = 0, 3, 4, 11


def choices(seed: int, t: int, batch: int, params: Params) -> dict[str, int]:
    """The per-batch choices of batch t of the stream of ``seed`` (pipeline 0)."""
    seeds = image_seed(seed, t * batch + tf.range(batch, dtype=tf.int64))
    u = batch_draws(seeds)[0].u.numpy()
    kind = int(np.sum(u[RESIZE_KIND] >= np.cumsum(params.resize_prob)[:-1]))
    mode = int(np.sum(u[RESIZE_MODE] >= np.cumsum([1 / 3] * 3)[:-1]))
    return {
        "resize kind": kind,
        "resize mode": mode,
        "noise kind": int(u[NOISE_KIND] < params.gaussian_noise_prob),
        "resize (kind, mode)": 3 * kind + mode,
        "final order": int(u[FINAL_ORDER] < 0.5),
    }


def provenance(size: int, batch: int, steps: int, seed: int) -> list[np.ndarray]:
    """For each of ``steps`` batches trained on, the source batch of each of its pairs."""
    if not size:
        return [np.full(batch, t) for t in range(steps)]
    state = empty_pool(size, [[1, 1, 1]], (False,))
    out = []
    for t in range(steps):
        labels = tf.fill([batch, 1, 1, 1], float(t))
        first = image_seed(seed, t * batch)
        state, pairs = pool_step(state, (labels,), pool_key(first), (False,))
        out.append(pairs[0].numpy().reshape(-1).astype(int))
    return out


def measure(size: int, batch: int, steps: int, seed: int, params: Params) -> dict[str, float]:
    skip = fill_batches(size, batch) if size else 0
    sources = provenance(size, batch, skip + steps, seed)[skip:]
    drawn = {t: choices(seed, t, batch, params) for t in {int(s) for b in sources for s in b}}
    row = {"distinct draws": float(np.mean([len(set(b)) for b in sources]))}
    for key in next(iter(drawn.values())):
        row[key] = float(np.mean([len({drawn[int(s)][key] for s in b}) for b in sources]))
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=300, help="batches measured after the fill")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--cases", nargs="+", default=["0:48", "180:48", "180:12", "0:8", "180:8"],
        help="POOL_SIZE:BATCH pairs (one pipeline, one replica)",
    )  # fmt: skip
    args = p.parse_args(argv)
    params = Params()
    rows = []
    for case in args.cases:
        size, batch = (int(v) for v in case.split(":"))
        rows.append((size, batch, measure(size, batch, args.steps, args.seed, params)))
    keys = list(rows[0][2])
    print(
        f"per batch, mean over {args.steps} batches after the pool's fill (seed {args.seed}): "
        "distinct per-batch draws, and distinct values of each choice (of 3, 3, 2, 9, 2)"
    )
    print()
    print("| pool_size | batch | " + " | ".join(keys) + " |")
    print("| --- " * (2 + len(keys)) + "|")
    for size, batch, row in rows:
        print(f"| {size} | {batch} | " + " | ".join(f"{row[k]:.2f}" for k in keys) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
