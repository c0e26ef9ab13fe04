"""Scale out, proved on CPU: MirroredStrategy on 2 logical CPUs computes what one device computes,
two local workers (``TF_CONFIG``) train and resume through the real ``train.py`` on their own
shares of the data, and the start-up errors name the value and the fix. The checks on 2 logical
CPUs (XLA, clipping, Real-ESRGAN's pair pool per replica, a diverging resume) share one fresh
process (:data:`TWO_CPUS`)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from sr.data.tfrecord import read_manifest
from sr.train.distribute import (
    chief_run_dir,
    input_pipeline,
    is_chief,
    local_cluster,
    tf_config,
)
from tests.conftest import ROOT, started

LOSS = re.compile(r"step (\d+)/\d+  loss ([\d.]+)")
SHARE = re.compile(r"input pipeline (\d) of 2 reads (images|shard files) ([\d, ]+) of (\d+)")
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
ENV.pop("TF_CONFIG", None)


def train_cmd(folders, root: Path, mode: str, run_dir: Path, *extra: str) -> list[str]:
    cmd = [
        sys.executable,
        str(ROOT / "train.py"),
        f"data={mode}",
        f"data.hr_dir={folders / 'train'}",
        "data.val_dir=null",
        "data.batch_size=8",
        "train.log_every=1",
        "model.features=[16,8]",
        f"hydra.run.dir={run_dir}",
        *extra,
    ]
    if mode == "tfrecord":
        cmd += [f"data.data_root={root}", "data.num_shards=4"]
    return cmd


def state(run_dir: Path) -> dict[str, np.ndarray]:
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(str(run_dir / "checkpoints")))
    keys = [
        k for k in reader.get_variable_to_shape_map() if k.startswith(("model/", "optimizer/"))
    ]
    return {k: reader.get_tensor(k) for k in keys}


# ------------------------------------------------------------------------------------------------
# Two logical CPUs: one fresh process (logical CPUs are set before TensorFlow's devices start)
# runs every check that needs them, one after the other, each in a section of its output
# ------------------------------------------------------------------------------------------------
# the checks of the tests below, in one process: a second TensorFlow start-up would add nothing.
# Each check's output lies between "@@ begin NAME" and "@@ end NAME RESULT" (RESULT: JSON, or
# "failed" after its traceback); op determinism goes off after each, as after a test
# (tests/conftest.py). The last check runs train.py itself as __main__: the process's exit code
# is train.py's.
TWO_CPUS = r"""
import importlib.util, json, logging, runpy, shutil, sys, traceback
from pathlib import Path
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
logging.getLogger("absl").setLevel(logging.WARNING)
from omegaconf import OmegaConf
from tensorflow.python.framework import config as tf_config
from sr.config import compose
from sr.train.app import run
from tests.conftest import ROOT, stopped_at
spec, tmp = json.loads(sys.argv[1]), Path(sys.argv[2])


def fresh_collective_keys():
    # Each check's strategies get their own collective keys: strategies of one process number
    # their all-reduces alike, and an all-reduce of one model meets another's shapes under the
    # same key. No public API sets the base: this is the class attribute TensorFlow's own tests
    # bump; if TensorFlow renames it, `+=` raises AttributeError and every check here fails.
    tf.distribute.MirroredStrategy._collective_key_base += 1000


def check(name, fn):
    fresh_collective_keys()
    print(f"@@ begin {name}", flush=True)
    try:
        result = fn()
    except Exception:
        traceback.print_exc(file=sys.stdout)
        result = "failed"
    print(f"@@ end {name} {json.dumps(result)}", flush=True)
    if tf_config.is_op_determinism_enabled():
        tf_config.disable_op_determinism()


def clip():  # each replica a share of a gradient of norm 13, clipped to 6.5
    from sr.train.step import clip_by_global_norm
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    whole = [tf.constant([3.0, 4.0]), tf.constant([12.0])]
    halves = strategy.experimental_distribute_values_from_function(
        lambda ctx: [g * (0.25 if ctx.replica_id_in_sync_group == 0 else 0.75) for g in whole]
    )
    out = strategy.run(lambda g: clip_by_global_norm(g, 6.5, tf.constant(1.0)), args=(halves,))
    return [strategy.reduce("SUM", o, axis=None).numpy().tolist() for o in out]


def split():  # train.py's train(): its exit code for the refusal
    path = ROOT / "train.py"
    script_spec = importlib.util.spec_from_file_location("train_script", path)
    script = importlib.util.module_from_spec(script_spec)
    script_spec.loader.exec_module(script)
    return script.train(compose(*spec["split"]), tmp / "split")[0]


def pool():  # the uninterrupted run, its copy as if killed after ckpt-3, resume= from that copy
    run(compose(*spec["pool"]), tmp / "pool_ref")
    two = stopped_at(tmp / "pool_ref", 3, tmp / "pool_two")
    run(compose(*spec["pool"], f"resume={two}"), two)


def good():  # the good start of the diverging resume, its config saved as train.py saves it
    cfg = compose(*spec["good"])
    run(cfg, tmp / "diverge")
    (tmp / "diverge" / ".hydra").mkdir()
    OmegaConf.save(cfg, tmp / "diverge" / ".hydra" / "config.yaml")
    shutil.copytree(tmp / "diverge" / "checkpoints" / "best", tmp / "best_before")


check("clip", clip)
check("mirrored", lambda: run(compose(*spec["mirrored"]), tmp / "mirrored") and None)
check("split", split)
check("pool", pool)
check("xla", lambda: run(compose(*spec["xla"]), tmp / "xla") and None)
check("good", good)
fresh_collective_keys()
print("@@ begin diverge", flush=True)  # to the end: train.py's exit code is the process's
sys.argv = [str(ROOT / "train.py"), *spec["diverge"]]
runpy.run_path(str(ROOT / "train.py"), run_name="__main__")
"""

MIRRORED_COMMON = (
    "data.deterministic=true",
    "data.flips=none",
    "train.deterministic_ops=true",
    "train.steps=6",
    "train.lr_schedule=constant",
)
MIRRORED = ("train.strategy=mirrored", "train.logical_cpus=2")


def overrides(cmd: list[str]) -> list[str]:
    """The overrides of a :func:`train_cmd` command, without ``hydra.*``."""
    return [a for a in cmd[2:] if not a.startswith("hydra.")]


class TwoCpus:
    """The process of :data:`TWO_CPUS`, running in the background until a test reads it."""

    def __init__(self, folders, tmp: Path):
        from tests.test_guard import diverging_start
        from tests.test_pair_pool import two_replica_pool

        self.tmp = tmp
        self.good = diverging_start(folders)
        spec = {
            "mirrored": overrides(
                train_cmd(folders, tmp / "root", "tfrecord", tmp, *MIRRORED_COMMON, *MIRRORED)
            ),
            "split": [
                *overrides(train_cmd(folders, tmp / "root", "generator", tmp)),
                "data.batch_size=7", *MIRRORED,
            ],
            "pool": list(two_replica_pool(folders)),
            "xla": overrides(train_cmd(
                folders, tmp / "root", "generator", tmp, *MIRRORED, "train.xla=true",
                "train.steps=2", "train.precision=bfloat16", "degradation=realesrgan",
                "degradation.device=accelerator", "data.channels=rgb", "data.patch_size=32",
            )),
            "good": [*self.good, "train.steps=20"],
            "diverge": [
                *self.good, "train.steps=60", "train.lr=0.5", "train.lr_schedule=constant",
                "train.guard_max_rollbacks=1", f"resume={tmp / 'diverge'}", *MIRRORED,
            ],
        }  # fmt: skip
        cmd = [sys.executable, "-c", TWO_CPUS, json.dumps(spec), str(tmp)]
        self.proc, self.log = started(cmd, dict(ENV, PYTHONPATH=str(ROOT)))
        self._out: str | None = None

    @property
    def out(self) -> str:
        """The whole output, once the process has ended."""
        if self._out is None:
            try:
                self.proc.wait(timeout=900)
            finally:
                self.stop()
        return self._out

    @property
    def returncode(self) -> int:
        self.out  # noqa: B018  (waits for the end)
        return self.proc.returncode

    def section(self, name: str):
        """``(output, result)`` of the check ``name``; fails the test if it raised."""
        found = re.search(rf"@@ begin {name}\n(.*?)@@ end {name} ([^\n]*)\n", self.out, re.S)
        assert found, self.out[-5000:]
        assert found.group(2) != '"failed"', found.group(1)[-5000:]
        return found.group(1), json.loads(found.group(2))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self._out is None:
            self.log.seek(0)
            self._out = self.log.read()
            self.log.close()


@pytest.fixture(scope="module")
def two_cpus(folders, tmp_path_factory):
    """:data:`TWO_CPUS` started on the first test that asks (its runs go on meanwhile)."""
    process = TwoCpus(folders, tmp_path_factory.mktemp("two_cpus"))
    yield process
    process.stop()


@pytest.mark.slow
def test_mirrored_on_two_logical_cpus_matches_one_device(folders, two_cpus, tmp_path):
    """The same 6 steps, global batch 8, the same batches (flips off: a replica's flips are
    seeded by its own batch number), op determinism: 2 replicas of 4 (:data:`TWO_CPUS`) against
    1 of 8. The gradients differ only in float32 summation order (each replica sums its 4
    examples, then the all-reduce adds the two sums), so the weights agree within float32
    rounding amplified by Adam over the steps; measured here: about 1e-7 absolute, asserted
    below 1e-5."""
    from tests.test_guard import logged_losses
    from tests.test_resume import run_here

    root = two_cpus.tmp / "root"  # the shards the replicas read (their writes are locked)
    # one device trains in this process while the replicas train in theirs
    for name, extra in (("one", ()), ("seed1", ("data.seed=1",))):
        run_here(train_cmd(folders, root, "tfrecord", tmp_path / name, *MIRRORED_COMMON, *extra))
    two, _ = two_cpus.section("mirrored")
    assert "MirroredStrategy, 2 replica(s) (CPU:0, CPU:1)" in two
    curve_one = dict(logged_losses(tmp_path / "one"))
    curve_two = {int(s): float(v) for s, v in LOSS.findall(two)}
    print("loss, one device:", curve_one)
    print("loss, 2 replicas:", curve_two)
    assert sorted(curve_one) == sorted(curve_two) == list(range(1, 7))
    assert all(abs(curve_one[s] - curve_two[s]) <= 2e-5 for s in curve_one)
    a, b = state(tmp_path / "one"), state(two_cpus.tmp / "mirrored")
    assert a.keys() == b.keys() and len(a) > 10
    worst = max(float(np.abs(a[k].astype(np.float64) - b[k]).max()) for k in a)
    print(f"largest weight or optimizer difference after 6 steps: {worst:.3g}")
    assert worst < 1e-5
    # the tolerance tells runs apart: one device on another batch stream (data.seed=1, the same
    # initial weights) ends far outside it, so the agreement above is not that of any two runs
    assert [s for s, _ in logged_losses(tmp_path / "seed1")] == list(range(1, 7))
    other = state(tmp_path / "seed1")
    apart = max(float(np.abs(a[k].astype(np.float64) - other[k]).max()) for k in a)
    print(f"largest difference from one device on another batch stream: {apart:.3g}")
    assert apart > 100 * 1e-5


@pytest.mark.slow
def test_xla_inside_the_mirrored_strategy(two_cpus):
    """A run under ``MirroredStrategy`` over 2 logical CPUs with XLA (:data:`TWO_CPUS`), in
    ``train.precision=bfloat16`` (the end-to-end run of tests/test_precision.py): the replicas'
    forward and backward passes are XLA clusters; the optimizer's cross-replica update is not
    (TensorFlow refuses variables of other devices inside a cluster); Real-ESRGAN's degradation
    is made by each replica in its training step (``degradation.device=accelerator``), outside
    the XLA clusters (its sizes are drawn)."""
    from tests.test_precision import assert_precision_logged

    out, _ = two_cpus.section("xla")
    assert "MirroredStrategy, 2 replica(s) (CPU:0, CPU:1)" in out and "final step 2:" in out
    assert [int(s) for s, _ in LOSS.findall(out)] == [1, 2]
    assert_precision_logged(out)


@pytest.mark.slow
def test_a_batch_that_does_not_split_over_the_replicas_is_refused(two_cpus):
    """train.py's ``train`` on 2 replicas with a global batch of 7 (:data:`TWO_CPUS`): exit code
    2, naming the batch and the sizes that split, before any model is built."""
    out, code = two_cpus.section("split")
    assert code == 2, out
    assert "data.batch_size=7 (the global batch) does not split over the 2 replicas" in out
    assert "use 6 or 8" in out
    assert "parameters" not in out  # before any model was built


@pytest.mark.slow
def test_clipping_under_two_replicas_clips_the_summed_gradient(two_cpus):
    """Two replicas each holding a share of a gradient of norm 13, clipped to 6.5
    (:data:`TWO_CPUS`): the factor is the summed gradient's (0.5), so the optimizer's sum of the
    clipped shares is the clipped whole, as on one replica (clipping each share by its own norm
    would give another sum). One replica: tests/test_guard.py."""
    _, summed = two_cpus.section("clip")
    np.testing.assert_allclose(summed[0], [1.5, 2.0], rtol=1e-6)
    np.testing.assert_allclose(summed[1], [6.0], rtol=1e-6)


@pytest.mark.slow
def test_two_replicas_keep_a_pool_each_and_resume_it(two_cpus):
    """Real-ESRGAN's pair pool (``tests/test_pair_pool.py``) on 2 logical CPUs
    (``train.strategy=mirrored``), the pool on the accelerator: one pool per replica, both in
    the checkpoint (``data/pool/replica_0``, ``_1``), each with pairs of its own; 6 steps
    stopped after step 3 (a copy of the run, its later checkpoint deleted:
    ``tests.conftest.stopped_at``), then ``resume=`` to 6, equal 6 steps in one run
    (:data:`TWO_CPUS`)."""
    from tests.test_resume_realesrgan import assert_same_checkpoints

    out, _ = two_cpus.section("pool")
    runs = out.split("final step 6:")  # the uninterrupted run's output, the resumed one's
    assert len(runs) == 3 and all("MirroredStrategy, 2 replica(s) (CPU:0, CPU:1)" in r
                                  for r in runs[:2]), out  # fmt: skip
    assert "continuing the checkpoint's batch stream at batch 3" in out, out
    one, two = (two_cpus.tmp / d / "checkpoints" / "ckpt-6" for d in ("pool_ref", "pool_two"))
    assert_same_checkpoints(one, two, ("model", "optimizer"))
    reader = tf.train.load_checkpoint(str(one))
    slots = [
        reader.get_tensor(f"data/pool/replica_{k}/slots/1/.ATTRIBUTES/VARIABLE_VALUE")
        for k in (0, 1)
    ]
    assert slots[0].shape == (8, 32, 32, 3) and slots[0].dtype == np.uint8
    assert not np.array_equal(*slots)  # each replica pools its own batches


@pytest.mark.slow
def test_a_diverging_resume_on_two_replicas_rolls_back_keeps_best_and_exits_4(two_cpus):
    """A good start, then ``resume=`` with ``train.lr=0.5`` on 2 replicas of the mirrored
    strategy, through train.py run as ``__main__`` (:data:`TWO_CPUS`'s last check, so that the
    process's exit code is train.py's): the guard rolls back (logged), gives up after
    ``train.guard_max_rollbacks`` with exit code 4 naming checkpoints/best, which is unchanged
    and loadable; every checkpoint left is finite and the suspect ones are gone. On one device,
    in process: tests/test_guard.py's
    ``test_a_resume_at_a_diverging_rate_is_caught_before_guard_from``."""
    from sr.config import compose
    from sr.loading.checkpoints import read_best
    from sr.loading.models import load_model_from_run
    from tests.test_faults import assert_all_finite, checkpoint_steps

    two_cpus.section("good")
    log = two_cpus.out.split("@@ begin diverge\n")[-1]
    assert two_cpus.returncode == 4, log[-3000:]
    run_dir = two_cpus.tmp / "diverge"
    assert "Rollback 1 of train.guard_max_rollbacks=1" in log
    assert "MirroredStrategy, 2 replica(s)" in log
    assert "the run diverged at step" in log and "checkpoints/best" in log
    best = read_best(run_dir)
    assert best is not None and best["step"] in (10, 20)
    before = {p.name: p.read_bytes() for p in (two_cpus.tmp / "best_before").iterdir()}
    after = {p.name: p.read_bytes() for p in (run_dir / "checkpoints" / "best").iterdir()}
    assert after == before and "best.json" in after
    model, _, step = load_model_from_run(run_dir)  # the default: best
    assert step == best["step"] and model.sr_checkpoint.startswith("best")
    assert max(checkpoint_steps(run_dir)) == 20  # the diverged checkpoints were deleted
    assert_all_finite(compose(*two_cpus.good, "train.steps=20"), run_dir)


# ------------------------------------------------------------------------------------------------
# Two workers on 127.0.0.1
# ------------------------------------------------------------------------------------------------
def start_cluster(cmd: list[str]) -> list[subprocess.Popen]:
    """Start ``cmd`` as worker 0 and worker 1 of a local cluster (``local_cluster``)."""
    return [
        subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=dict(ENV, TF_CONFIG=conf),
        )
        for conf in local_cluster(2)
    ]


def cluster(cmd: list[str]) -> list[str]:
    """Run ``cmd`` as a local 2-worker cluster to the end; returns both outputs."""
    procs = start_cluster(cmd)
    outs = [p.communicate(timeout=300)[0] for p in procs]
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out
    return outs


@pytest.mark.slow
def test_two_workers_train_on_their_own_shares_stop_together_and_resume_as_a_cluster(
    folders, tmp_path
):
    """Two local workers of the real ``train.py`` (``TF_CONFIG``) on TFRecord shards: each
    reads its own shard files (a generator source's shares: the in-process
    :func:`test_each_input_pipeline_draws_from_its_own_share`), both log the same losses, the
    chief writes the checkpoints. SIGTERM to worker 1 (not the chief: a preempted worker) makes
    the cluster save and stop at one step, exit 143, and name the cluster's run to resume; the
    cluster then resumes from that checkpoint on the checkpoint's batch stream."""
    run_dir = tmp_path / "run"
    cmd = train_cmd(
        folders, tmp_path / "root", "tfrecord", run_dir, "train.strategy=multi_worker",
        "train.ckpt_every=2",
    )  # fmt: skip
    procs = start_cluster([*cmd, "train.steps=100000"])
    lines = []
    for line in procs[1].stdout:  # past step 2, whose checkpoint is periodic
        lines.append(line)
        if any(int(s) >= 3 for s, _ in LOSS.findall(line)):
            break
    procs[1].send_signal(signal.SIGTERM)
    outs = [procs[0].communicate(timeout=120)[0], "".join(lines) + procs[1].communicate(120)[0]]
    stopped = [
        re.search(r"stopped by SIGTERM at step (\d+); resume with resume=(\S+)", o) for o in outs
    ]
    assert all(stopped), outs
    assert [p.returncode for p in procs] == [128 + signal.SIGTERM] * 2
    step = int(stopped[0].group(1))
    assert int(stopped[1].group(1)) == step >= 3  # the same step on every worker
    assert stopped[1].group(2) == str(run_dir)  # the cluster's run, not the worker's folder
    shares = [SHARE.search(out) for out in outs]
    assert all(shares), outs
    assert [int(m.group(1)) for m in shares] == [0, 1]
    parts = [set(int(i) for i in m.group(3).split(", ")) for m in shares]
    assert not parts[0] & parts[1] and parts[0] | parts[1] == set(range(int(shares[0].group(4))))
    # one replicated model: every worker logs the same losses
    assert LOSS.findall(outs[0]) == LOSS.findall(outs[1]) != []
    ckpts = {p.name for p in (run_dir / "checkpoints").glob("ckpt-*.index")}
    assert {"ckpt-2.index", f"ckpt-{step}.index"} <= ckpts, ckpts
    worker = run_dir / "workers" / "worker-1"
    assert (worker / "train.log").is_file() and not (worker / "checkpoints-tmp").exists()
    assert not (worker / "checkpoints").exists()  # the model checkpoints are the chief's
    before = state(run_dir)

    outs = cluster([*cmd, f"train.steps={step + 2}", f"resume={run_dir}"])
    print(outs[0].splitlines()[-1])
    for out in outs:
        assert f"resumed from {run_dir / 'checkpoints' / f'ckpt-{step}'} at step {step}" in out
        assert f"continuing the checkpoint's batch stream at batch {step}" in out
        assert [int(s) for s, _ in LOSS.findall(out)] == [step + 1, step + 2]
    after = state(run_dir)
    assert any(not np.array_equal(before[k], after[k]) for k in before)  # it trained on


# ------------------------------------------------------------------------------------------------
# Each pipeline's share, from the image indices of its batches (in process)
# ------------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("mode", ["tfrecord", "generator"])
def test_each_input_pipeline_draws_from_its_own_share(folders, tmp_path, compose, mode):
    from sr.config import build_source

    extra = (
        (f"data.data_root={tmp_path / 'root'}", "data.num_shards=4") if mode == "tfrecord" else ()
    )
    src = build_source(
        compose(f"data={mode}", f"data.hr_dir={folders / 'train'}", "data.val_dir=null", *extra)
    )
    src.prepare()
    # a patch: its image index and its pixels. Generator pipelines read disjoint images;
    # TFRecord pipelines read disjoint shard files, whose records (patches of every image: the
    # write-time shuffle spreads each image over all shards) are then disjoint
    seen, images = [], []
    for i in range(2):
        it = iter(src.patch_dataset(0, 4, (i, 2)))
        # 40 batches of 4: 160 draws from a pipeline's ~8 records through a shuffle buffer of
        # many epochs; a record is missed with p = (7/8)^160 < 1e-9 (12 batches missed one in
        # ~40 runs: CI failed once with 15 of 16 records seen)
        batches = [next(it) for _ in range(40)]
        del it
        keys = {
            (int(k), hashlib.sha1(hr.tobytes()).hexdigest())
            for b in batches
            for k, hr in zip(b["image"].numpy(), b["hr"].numpy())
        }
        seen.append(keys)
        images.append({k for k, _ in keys})
    assert seen[0] and seen[1] and not seen[0] & seen[1]
    if mode == "generator":  # images i, i + 2, ... exactly
        assert images[0] == set(range(0, len(src.images.files), 2))
        assert images[1] == set(range(1, len(src.images.files), 2))
    else:  # together, every record of the set
        assert len(seen[0] | seen[1]) == read_manifest(src.tfrecord_dir)["records"]


# ------------------------------------------------------------------------------------------------
# Errors at start-up
# ------------------------------------------------------------------------------------------------
def test_multi_worker_without_tf_config_and_fewer_shards_than_workers(folders, tmp_path, compose):
    from sr.config import build_source
    from sr.data.tfrecord import ShardError
    from sr.train.distribute import DistributeError, make_strategy

    os.environ.pop("TF_CONFIG", None)
    with pytest.raises(DistributeError, match="needs TF_CONFIG"):
        make_strategy("multi_worker")
    src = build_source(
        compose(
            "data=tfrecord",
            f"data.hr_dir={folders / 'train'}",
            "data.val_dir=null",
            f"data.data_root={tmp_path / 'root'}",
            "data.num_shards=1",
        )
    )
    src.prepare()
    src.check_pipelines(1)
    with pytest.raises(
        ShardError, match="2 workers but 1 shard file.*data.num_shards to at least 2"
    ):
        src.check_pipelines(2)


def test_tf_config_roles(monkeypatch, tmp_path):
    conf = {"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(conf))
    assert tf_config() == conf and not is_chief() and input_pipeline() == 1
    assert chief_run_dir(tmp_path / "run" / "workers" / "worker-1") == tmp_path / "run"
    conf["task"]["index"] = 0
    monkeypatch.setenv("TF_CONFIG", json.dumps(conf))
    assert is_chief() and input_pipeline() == 0
    conf["cluster"]["chief"] = ["c:3"]
    monkeypatch.setenv("TF_CONFIG", json.dumps(conf))
    assert not is_chief() and input_pipeline() == 1  # the chief is pipeline 0
    monkeypatch.setenv("TF_CONFIG", "{not json")
    from sr.train.distribute import DistributeError

    with pytest.raises(DistributeError, match="TF_CONFIG is not a cluster spec"):
        tf_config()


def test_the_default_strategy_is_told_apart_by_public_api():
    """``describe`` names TensorFlow's default strategy by ``tf.distribute.has_strategy()`` in
    its scope (no private class name): the default is "default strategy", the others by name."""
    from sr.train.distribute import describe, is_default

    default = tf.distribute.get_strategy()
    one = tf.distribute.OneDeviceStrategy("/cpu:0")
    mirrored = tf.distribute.MirroredStrategy(["/cpu:0"])
    assert is_default(default) and not is_default(one) and not is_default(mirrored)
    device = "GPU" if tf.config.list_logical_devices("GPU") else "CPU"
    assert describe(default) == f"default strategy (one device: {device}), 1 replica(s)"
    assert describe(one) == "OneDeviceStrategy, 1 replica(s) (CPU:0)"
    assert describe(mirrored).startswith("MirroredStrategy, 1 replica(s)")
    assert not tf.distribute.has_strategy()  # every scope left
