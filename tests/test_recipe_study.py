"""benchmarks/recipe_study.py without training: the train.py command of an equal-steps run (the
recipe's schedule scaled, read from its experiment file) and of an equal-minutes run (the recipe's
own schedule over the budget), the studies' fixed base recipe, run names, and the end of a run."""

from __future__ import annotations

import pytest

from sr.config import compose
from tests.fake_run import load_script

rs = load_script("recipe_study", "benchmarks")


def _values(cmd: list[str]) -> dict[str, str]:
    return dict(a.split("=", 1) for a in cmd[2:])


def test_equal_steps_scale_the_recipes_warm_up_and_drop_the_budget(tmp_path):
    recipe = compose(f"experiment={rs.RECIPE}").train
    cmd = rs.command(tmp_path / "run", ["data=generator"], 3, 600, None, ["train.ema=0.999"])
    v = _values(cmd)
    assert v["train.steps"] == "600" and v["train.max_minutes"] == "null"
    want = round(recipe.lr_warmup_steps * 600 / recipe.steps)
    assert int(v["train.lr_warmup_steps"]) == want
    assert v["seed"] == "3" and v["data"] == "generator" and v["train.ema"] == "0.999"
    assert v["hydra.run.dir"] == str(tmp_path / "run")
    # the composed run is what the command says
    cfg = compose(*cmd[2:-2], "train.ema=0.999")
    assert cfg.train.steps == 600 and cfg.train.max_minutes is None
    assert cfg.train.lr_warmup_steps == want


def test_equal_minutes_keep_the_recipes_schedule_over_the_budget(tmp_path):
    cmd = rs.command(tmp_path / "run", rs.STUDIES["size"]["wide"], 0, None, 4.875, [])
    v = _values(cmd)
    assert "train.steps" not in v and "train.lr_warmup_steps" not in v
    cfg = compose(*cmd[2:-1])
    recipe = compose(f"experiment={rs.RECIPE}")
    assert cfg.train.max_minutes == 4.875 and cfg.model.features == 64
    assert cfg.train.steps == recipe.train.steps  # the budget, not the steps, ends the schedule
    assert cfg.train.lr_warmup_steps == recipe.train.lr_warmup_steps


def test_the_data_studies_keep_the_former_recipe_and_name_it():
    former = compose(f"experiment={rs.RECIPE}", *rs.FORMER)
    assert (former.model.blocks, former.data.batch_size, former.train.lr) == (16, 16, 1e-3)
    now = compose(f"experiment={rs.RECIPE}")
    assert (now.model.blocks, now.data.batch_size) != (16, 16)  # else FORMER is needless
    grid = rs.BASE["crops"] + rs.STUDIES["crops"]["grid"]
    assert rs.run_name(grid, "600", 0) == "recipe_blocks-16_batch_size-16_lr-1e-3_600_seed0"
    # equal settings share a run across studies; the recipe as is has a name of its own
    y = rs.BASE["lr_order"] + rs.STUDIES["lr_order"]["y"]
    assert rs.run_name(y, "600", 0) == rs.run_name(grid, "600", 0)
    assert rs.run_name(rs.STUDIES["size"]["former"], "600", 0) == rs.run_name(grid, "600", 0)
    assert rs.run_name([], rs.length_tag(None, 4.875), 1, 14) == "recipe_images14_4.875min_seed1"


def test_a_run_has_ended_at_its_checkpoint_or_its_final_log_line(tmp_path):
    assert not rs.ended(tmp_path, 600) and not rs.ended(tmp_path, None)
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "ckpt-600.index").write_bytes(b"")
    assert rs.ended(tmp_path, 600) and not rs.ended(tmp_path, 601)
    log = tmp_path / "train.log"
    log.write_text("[...][sr.train.loop][INFO] - [0:19:30] step 8902/40000  loss 0.019\n")
    assert not rs.ended(tmp_path, None)  # killed in the middle of its budget
    log.write_text(log.read_text() + "[...] - final step 8902: val PSNR 30.91 dB\n")
    assert rs.ended(tmp_path, None)


@pytest.mark.parametrize("argv", [["size", "--steps", "0"], ["size", "--minutes", "-1"]])
def test_bad_lengths_are_refused(argv, capsys):
    with pytest.raises(SystemExit):
        rs.parse_args(argv)
    assert "--steps must be >= 1 and --minutes > 0" in capsys.readouterr().err
