"""Runs saved before the loss terms: their ``loss`` node (one class named by ``_target_``, with
its keys) in today's form (``terms``), so that such a run resumes (``sr.train.rundir``
compares the run's loss with the command line's by :func:`sr.losses.registry.full_terms`)."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

TARGET = "sr.losses.Loss"  # today's class of the loss group (``LossConfig._target_``)
PIXEL_CLASSES = {
    "sr.train.losses.L1": "l1",
    "sr.train.losses.L2": "l2",
    "sr.train.losses.Charbonnier": "charbonnier",
}
REALESRGAN_CLASS = "sr.train.gan_loss.RealESRGANLoss"


def _target(usm) -> str:
    return "gt_usm" if usm in (True, None) else "gt"


def terms_of_old_loss(node: dict, discriminator: bool) -> dict | None:
    """The terms of an old ``loss`` node (plain values), or None if it is not one.

    ``loss=l1``, ``l2`` and ``charbonnier`` (``eps``) become the one term, on the pairs'
    target; ``loss=realesrgan`` becomes ``l1`` (``l1_weight``, ``l1_gt_usm``), ``perceptual``
    (``perceptual_weight``, ``vgg_weights``, ``vgg_layer_weights``, ``percep_gt_usm``; left out
    at weight 0, when no VGG was built) and, with a discriminator or a GAN weight, ``gan``
    (``gan_weight``, ``gan_gt_usm``, ``vanilla``), their keys' defaults where the node has none.
    """
    target = node.get("_target_")
    if target in PIXEL_CLASSES:
        name = PIXEL_CLASSES[target]
        keys = {"eps": node["eps"]} if name == "charbonnier" and "eps" in node else {}
        return {name: keys}
    if target != REALESRGAN_CLASS:
        return None
    terms = {
        "l1": {"weight": node.get("l1_weight", 1.0), "target": _target(node.get("l1_gt_usm"))}
    }
    if node.get("perceptual_weight", 1.0) > 0:
        terms["perceptual"] = {
            "weight": node.get("perceptual_weight", 1.0),
            "target": _target(node.get("percep_gt_usm")),
            "vgg_weights": node.get("vgg_weights", "imagenet"),
            "layer_weights": list(node.get("vgg_layer_weights", [0.1, 0.1, 1.0, 1.0, 1.0])),
        }
    if discriminator or node.get("gan_weight", 0.1) > 0:
        terms["gan"] = {
            "weight": node.get("gan_weight", 0.1),
            "target": "gt" if node.get("gan_gt_usm", False) is False else "gt_usm",
            "formulation": "vanilla",
        }
    return terms


def upgrade(cfg: DictConfig) -> DictConfig:
    """``cfg`` (a run's saved config) with an old ``loss`` node in today's form
    (``{_target_: sr.losses.Loss, terms: ...}``), in place; any other config as it is."""
    node = cfg.get("loss") if isinstance(cfg, DictConfig) else None
    if not isinstance(node, DictConfig):
        return cfg
    discriminator = bool(OmegaConf.select(cfg, "discriminator._target_", default=None))
    terms = terms_of_old_loss(OmegaConf.to_container(node, resolve=True), discriminator)
    if terms is not None:
        with_flag = OmegaConf.is_struct(cfg)
        OmegaConf.set_struct(cfg, False)
        cfg.loss = OmegaConf.create({"_target_": TARGET, "terms": terms})
        OmegaConf.set_struct(cfg, with_flag)
    return cfg


def comparable(cfg: DictConfig) -> DictConfig:
    """A copy of ``cfg`` whose ``loss`` is in today's form (:func:`upgrade`) with every key of
    each term (``sr.losses.registry.full_terms``), so that a run's saved config and a command
    line compare by what they train (``loss=l1`` against ``loss=charbonnier``: their terms'
    keys differ, although a preset writes none). A config without a loss node, or whose terms
    do not read (a term no longer registered), is returned as it is (copied)."""
    from sr.core.errors import ConfigError
    from sr.losses.registry import full_terms

    cfg = upgrade(OmegaConf.create(OmegaConf.to_container(cfg, resolve=False)))
    terms = OmegaConf.select(cfg, "loss.terms", default=None)
    if terms is None:
        return cfg
    try:
        cfg.loss.terms = full_terms(OmegaConf.to_container(terms, resolve=True))
    except ConfigError:
        pass
    return cfg
