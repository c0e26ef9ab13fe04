"""A model of one's own, outside ``sr/``: the whole module that docs/architecture.md shows ("Add a
model") is written into a package of its own, named in ``plugins=[...]``, and trained by
``train.py``; its run is then evaluated, upscaled and exported by the scripts users run, which
import it again from the run's saved config. Processes of their own: registering a model is
global to a process (the other tests see the package's models only)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT

MARKER = "<!-- plugin example: my_models/fsrcnn.py -->"


def documented_module() -> str:
    """The python block that follows :data:`MARKER` in docs/architecture.md."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    assert MARKER in text, "docs/architecture.md lost its plug-in example"
    block = re.search(r"```python\n(.*?)```", text.split(MARKER, 1)[1], re.S)
    return block.group(1)


def test_the_documented_module_is_the_one_tested():
    """The block is a whole module: a schema, a builder, a registration, nothing elided."""
    code = documented_module()
    compile(code, "fsrcnn.py", "exec")
    assert "SPEC = register(ModelSpec(" in code and "..." not in code


AFTER = """
import json, sys
from tests.fake_run import load_script
run, val, image = sys.argv[1:4]
codes = [
    load_script("evaluate").main([run, val, "--out", run + "/eval"]),
    load_script("upscale").main([run, image, run + "/up.png"]),
    load_script("export").main([run, run + "/saved"]),
]
print(json.dumps(codes))
"""


@pytest.mark.slow
def test_a_plugin_model_trains_evaluates_upscales_and_exports(folders, tmp_path):
    package = tmp_path / "plugins" / "my_models"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "fsrcnn.py").write_text(documented_module())
    path = f"{tmp_path / 'plugins'}{os.pathsep}{ROOT}"
    env = dict(os.environ, PYTHONPATH=path, TF_CPP_MIN_LOG_LEVEL="2")
    run_dir = tmp_path / "run"
    train = [
        sys.executable, "train.py", "plugins=[my_models.fsrcnn]", "model=fsrcnn", "model.m=1",
        "model.d=8", "model.s=4", "data=generator", f"data.hr_dir={folders / 'train'}",
        f"data.val_dir={folders / 'val'}", "data.batch_size=2", "data.pool_size=4",
        "train.steps=2", "train.log_every=1", "train.val_every=2", "train.ckpt_every=2",
        f"hydra.run.dir={run_dir}",
    ]  # fmt: skip
    done = subprocess.run(train, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (run_dir / ".hydra" / "config.yaml").read_text().count("my_models.fsrcnn") == 1

    refused = subprocess.run(
        train[:2] + ["model=fsrcnn"], cwd=ROOT, env=env, capture_output=True, text=True
    )  # without the plugin: not an option of the model group
    assert refused.returncode == 2 and "no option 'fsrcnn'" in refused.stderr

    image = folders / "val" / sorted(os.listdir(folders / "val"))[0]
    after = [sys.executable, "-c", AFTER, str(run_dir), str(folders / "val"), str(image)]
    done = subprocess.run(after, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == [0, 0, 0]
    assert (run_dir / "eval" / "results.csv").is_file() and (run_dir / "up.png").is_file()
    assert (run_dir / "saved" / "saved_model.pb").is_file()
