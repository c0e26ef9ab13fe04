"""Trained models for every command: built from a config, restored from a run folder, read from
a PyTorch weight file, and labelled for results (:mod:`sr.loading.models`); what a run's
checkpoint holds and which one a command reads (:mod:`sr.loading.checkpoints`).

Below the training app (``sr.train``) and above the models, so that ``scripts/``, ``sr.deploy``,
``sr.results`` and ``sr.inference`` load models without importing the trainer
(``pyproject.toml``'s import-linter contracts).
"""
