"""SR architectures and the networks of GAN training, as Keras 3 models.

Each SR architecture is one package, ``sr/models/<arch>/`` (its schema and registration in
``__init__``, with no TensorFlow; its network in ``net.py``; its PyTorch state-dict layout in
``layout.py``), found by :mod:`sr.models.registry`, which builds any of them from a ``model``
config (``build_model``). Every SR model maps ``[B, h, w, C]`` in [0, 1] to
``[B, scale h, scale w, C]`` for any h and w; multi-frame models take a window of k frames,
``[B, k, h, w, C]``, and return the SR of its target frame. Shared here: the layers
(``layers``), what a model costs (``complexity``), the discriminator, spectral norm and VGG19 of
GAN training, and the state-dict contract and detection (``state_dicts``).

Nothing here imports Keras on ``import sr.models``: the config (``sr.config``) reads the schemas
before TensorFlow starts."""
