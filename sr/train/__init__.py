"""The application: what ``python train.py`` runs (``app``), the Trainer (``loop``) and its step,
schedule, optimizers, losses, validation, checkpoint policy, run folders and distribution
(docs/architecture.md). The top layer: it may import every other package of ``sr``."""
