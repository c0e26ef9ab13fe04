"""``train.py`` with one checkpoint write that pauses half-way, for the fault-injection test.

``python tests/pausing_train.py MARKER [train.py overrides]`` runs ``train.py``, except that the
first checkpoint whose files are written pauses before ``tf.train.CheckpointManager`` records it
in ``checkpoints/checkpoint`` (its index and data files exist, the manager does not list it yet):
it writes ``MARKER`` and sleeps, so that the test can SIGKILL the run at exactly that moment.
With ``--after`` before ``MARKER`` it pauses just after the first checkpoint is recorded instead
(a run preempted between two steps, its last checkpoint complete).
"""

import runpy
import sys
import time
from pathlib import Path

from tensorflow.python.checkpoint import checkpoint_management

ROOT = Path(__file__).resolve().parents[1]
after = sys.argv[1] == "--after" and bool(sys.argv.pop(1))
marker = Path(sys.argv.pop(1))
record = checkpoint_management.update_checkpoint_state_internal


def pause(why: str) -> None:
    if not marker.exists():
        marker.write_text(why + "\n")
        time.sleep(600)


def pausing_record(*args, **kwargs):
    if not after:
        pause("checkpoint files written, not yet recorded")
    out = record(*args, **kwargs)
    if after:
        pause("checkpoint written and recorded")
    return out


checkpoint_management.update_checkpoint_state_internal = pausing_record
sys.argv[0] = str(ROOT / "train.py")
runpy.run_path(str(ROOT / "train.py"), run_name="__main__")
