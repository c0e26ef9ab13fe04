"""The run's loss: the terms of ``loss.terms``, built from their settings, in the given order
(``conf/loss/<preset>.yaml`` and the command line: ``loss=charbonnier
+loss.terms.fft.weight=0.05``). The trainer's part sums them (``sr.train.parts``,
``sr.train.gan``) and records each. Imports no TensorFlow (the terms do when they compute)."""

from __future__ import annotations

from collections.abc import Mapping

from sr.losses.base import Term
from sr.losses.registry import get, term_settings


def plain(node) -> dict:
    """A config node (``DictConfig``, interpolations resolved) or mapping as plain values."""
    from omegaconf import DictConfig, OmegaConf

    if isinstance(node, DictConfig):
        return OmegaConf.to_container(node, resolve=True)
    return dict(node or {})


class Loss:
    """The loss terms of a run (``hydra.utils.instantiate(cfg.loss)``).

    Args:
        terms: ``loss.terms``: term name to its keys (``weight``, ``target``, its own); the
            keys not given take their schema's defaults (``sr.losses.registry``).

    Attributes:
        terms: the built :class:`sr.losses.base.Term` objects, in the given order.
        names: their names, in that order.
        adversarial: the adversarial term (``gan``), or None: it needs a discriminator.
        content: the other terms (compared with an image), in order.

    Raises:
        ConfigError: no term, an unknown term or key, a value out of bounds.
    """

    def __init__(self, terms: Mapping | None = None):
        settings = term_settings(plain(terms))
        self.terms: list[Term] = [get(n).term(s) for n, s in settings.items()]
        self.kinds = {n: get(n).kind for n in settings}
        self.names = tuple(settings)
        self.adversarial = next(
            (t for t in self.terms if self.kinds[t.name] == "adversarial"), None
        )
        self.content = [t for t in self.terms if t is not self.adversarial]

    @property
    def name(self) -> str:
        """``charbonnier+fft``: the terms' names (TensorBoard HParams ``loss``)."""
        return "+".join(self.names)

    @property
    def feature(self) -> bool:
        """A term of a network's features weighs in (``perceptual``): it trades PSNR for
        texture."""
        return any(self.kinds[t.name] == "feature" and t.weight > 0 for t in self.terms)

    def pixel_terms(self) -> list[Term]:
        """The terms of kind ``pixel`` (the divergence guard's loss under a GAN)."""
        return [t for t in self.content if self.kinds[t.name] == "pixel"]

    def build(self) -> None:
        """Build what each term needs before any step (the perceptual term's VGG19).

        Raises:
            ConfigError: a weights file is missing or not the network's (naming it).
        """
        for term in self.terms:
            term.build()

    def describe(self) -> str:
        """Each term and its keys, joined by `` + `` (the log, TensorBoard HParams)."""
        return " + ".join(t.describe() for t in self.terms)
