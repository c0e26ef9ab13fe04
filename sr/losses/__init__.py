"""Loss terms, one module each, registered by name (``sr.losses.registry``), composed by the
``loss`` config group's ``terms`` (:class:`Loss`). Importing this package imports no TensorFlow:
the config reads the terms' schemas before TensorFlow starts; a term imports it when it
computes."""

from sr.losses.loss import Loss

__all__ = ["Loss"]
