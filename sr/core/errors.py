"""Errors shared across layers."""


class ConfigError(ValueError):
    """A config value that cannot work (out of range, inconsistent); names the key and the fix.
    Raised by the data sources, the config and the trainer at start-up, before any work;
    ``train.py`` exits with code 2 on it."""


class RunDirError(ValueError):
    """A run directory without the config or checkpoint it should hold."""


class ImageFolderError(ValueError):
    """A folder that cannot serve as a dataset (missing, empty, unreadable images)."""
