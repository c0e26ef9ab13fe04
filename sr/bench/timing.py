"""Timing of one pipeline in its own process, for ``scripts/bench_data.py``: patches/s over
repeats after a warm-up, time to first batch, CPU time, bytes read and decodes in the timed part.
"""

from __future__ import annotations

import resource
import statistics
import time


def rchar() -> int:
    """Bytes this process has read so far (``rchar`` of ``/proc/self/io``)."""
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("rchar"))


def rss_mb() -> float:
    """This process's resident memory now (``VmRSS``), in MB."""
    with open("/proc/self/status") as f:
        kb = next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))
    return kb / 1024


def peak_rss_mb() -> float:
    """This process's peak resident memory so far (``ru_maxrss``), in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed_batches(it, batches: int, seconds: float) -> tuple[int, float, list]:
    """Pull batches for at least ``seconds`` and 2 batches, or until ``batches`` were pulled.
    Returns (patches, wall seconds, the image index arrays seen)."""
    patches, seen, t0 = 0, [], time.perf_counter()
    for k in range(batches):
        batch = next(it)
        patches += int(batch[0].shape[0])
        if len(batch) > 2:
            seen.append(batch[2].numpy())
        if k >= 1 and time.perf_counter() - t0 >= seconds:
            break
    return patches, time.perf_counter() - t0, seen


def time_pipeline(ds, decodes, a) -> dict:
    """Time the batches of ``ds``: the first batch, a warm-up as long as a repeat (``10 warmup``
    batches at most), then ``a.repeats`` repeats of :func:`timed_batches`. ``decodes()`` counts
    the decodes so far (``None`` counts as 0).

    Returns:
        ``first`` (the first batch), ``first_batch_s``, ``batch_size``, ``rates`` (patches/s per
        repeat), ``total`` (patches timed), ``seen`` (index arrays of the timed batches, when the
        batches carry one), ``cpu`` (CPU-seconds), ``io`` (bytes read) and ``dec`` (decodes) of
        the repeats.
    """
    t0 = time.perf_counter()
    it = iter(ds)
    first = next(it)
    first_batch_s = time.perf_counter() - t0
    batch_size = int(first[0].shape[0])
    timed_batches(it, 10 * a.warmup, a.seconds)  # warm-up: as long as a repeat
    dec0, io0, cpu0 = decodes() or 0, rchar(), time.process_time()
    rates, total, seen = [], 0, []
    for _ in range(a.repeats):
        patches, wall, got = timed_batches(it, a.batches, a.seconds)
        rates.append(patches / wall)
        total += patches
        seen += got
    cpu = time.process_time() - cpu0
    io, dec = rchar() - io0, (decodes() or 0) - dec0
    del it
    return {
        "first": first,
        "first_batch_s": first_batch_s,
        "batch_size": batch_size,
        "rates": rates,
        "total": total,
        "seen": seen,
        "cpu": cpu,
        "io": io,
        "dec": dec,
    }


def rate_stats(rates: list) -> dict:
    """``{"median", "min", "max"}`` of a list of rates."""
    return {"median": statistics.median(rates), "min": min(rates), "max": max(rates)}


def time_decodes(load, files, workers: int, a) -> tuple[list, float]:
    """Decode ``files`` with ``load`` on ``workers`` threads: a warm-up of ``2 workers`` files,
    then ``a.repeats`` chunks of ``a.decode_images`` files (cycling through the list). Returns
    (files/s per chunk, CPU-seconds of the chunks)."""
    from concurrent.futures import ThreadPoolExecutor

    rates = []
    with ThreadPoolExecutor(workers) as ex:
        list(ex.map(load, files[: 2 * workers]))  # warm-up
        cpu0 = time.process_time()
        for r in range(a.repeats):
            chunk = [files[(r * a.decode_images + k) % len(files)] for k in range(a.decode_images)]
            t0 = time.perf_counter()
            list(ex.map(load, chunk))
            rates.append(len(chunk) / (time.perf_counter() - t0))
        cpu = time.process_time() - cpu0
    return rates, cpu
