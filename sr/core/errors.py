"""Errors shared across layers."""


class ConfigError(ValueError):
    """A config value that cannot work (out of range, inconsistent); names the key and the fix.
    Raised by the data sources, the config and the trainer at start-up, before any work;
    ``train.py`` exits with code 2 on it."""
