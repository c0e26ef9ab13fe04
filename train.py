"""Train a super-resolution model: ``python train.py [data=tfrecord|generator] [model=...] [k=v]``.

See README.md for the config groups and common overrides.
"""

import logging
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import hydra  # noqa: E402
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from sr.config import ConfigError  # noqa: E402  (importing it registers the schemas)
from sr.data.images import ImageFolderError  # noqa: E402
from sr.train.app import describe, run  # noqa: E402

log = logging.getLogger("train")
logging.getLogger("absl").setLevel(logging.WARNING)  # checkpoint-writer chatter


@hydra.main(config_path="conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float | None:
    run_dir = HydraConfig.get().runtime.output_dir
    log.info("run directory %s\n%s", run_dir, describe(cfg))
    try:
        final = run(cfg, run_dir)
    except (ConfigError, ImageFolderError, FileNotFoundError) as e:
        log.error("%s", e)
        sys.exit(2)
    if final.get("interrupted"):
        sys.exit(128 + int(final["interrupted"]))
    return final.get("val/psnr")


if __name__ == "__main__":
    main()
