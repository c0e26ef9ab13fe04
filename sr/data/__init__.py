"""Input pipeline: image listing and decoding, Y channel, the LR operator, both loader modes."""

from sr.data.loader import DataLoader

__all__ = ["DataLoader"]
