"""Multi-frame ESPCN by early fusion: J. Caballero, C. Ledig, A. Aitken, A. Acosta, J. Totz,
Z. Wang, W. Shi, "Real-Time Video Super-Resolution with Spatio-Temporal Networks and Motion
Compensation" (VESPCN), CVPR 2017, section 3.1.

Early fusion stacks the k LR frames of a window along the channel axis, so the first convolution
sees all of them at once and collapses the temporal dimension; the rest is ESPCN (Shi et al.,
CVPR 2016: 5x5 with 64 filters, 3x3 with 32, 3x3 with r^2 C, tanh between them, pixel shuffle).

Motion compensation (``align``): VESPCN warps each neighbour onto the target frame with a learned
flow before fusing. ``global`` (default) does it with one translation per frame, estimated and
applied without weights (:class:`sr.models.align.GlobalAlign`: phase correlation refined to 1/16
pixel, Fourier shift), which fits camera motion (bursts, pans, handheld sequences), not objects
moving on their own. ``none`` fuses the frames as they are, VESPCN's early fusion without motion
compensation: the network must then learn every motion within its receptive field (4 LR
pixels). On the demo sequences ``none`` trails the single frame and ``global`` gains on it
(``docs/performance.md``, "Sequence mode").

With ``frames=1`` the model is ESPCN itself (input ``[B, h, w, C]``), so that a single-frame run
(``data.frames=1``) trains the same network on the same data for comparison.

Initialisation (``fusion_init``): ``target`` (default) starts the fusion convolution as ESPCN's on
the target frame alone: the target frame's slice of its kernel is Glorot-uniform with ESPCN's
fan-in (5 x 5 x C) and the other frames' slices are zero, the "centre" inflation of a 2D kernel to
several frames (J. Carreira, A. Zisserman, "Quo Vadis, Action Recognition?", CVPR 2017, section
2.4, with the weight on one frame instead of spread over all). The network therefore starts as the
single-frame model and training moves the neighbours' weights only as far as they lower the loss;
``glorot`` initialises all k frames at random as one 5 x 5 x k C kernel (VESPCN's setting).
"""

from __future__ import annotations

import keras

from sr.core.frames import target_index
from sr.models.align import GlobalAlign
from sr.models.espcn.net import espcn_body


@keras.saving.register_keras_serializable(package="sr")
class StackFrames(keras.layers.Layer):
    """``[B, k, h, w, C]`` to ``[B, h, w, k C]``: frame j's channels at ``j C .. j C + C - 1``."""

    def reach(self) -> int:
        """Each output pixel reads its own pixels only (``sr.inference.receptive_radius``)."""
        return 0

    def call(self, x):
        shape = keras.ops.shape(x)
        x = keras.ops.transpose(x, (0, 2, 3, 1, 4))
        return keras.ops.reshape(x, (shape[0], shape[2], shape[3], shape[1] * shape[4]))

    def compute_output_shape(self, shape):
        b, k, h, w, c = shape
        return (b, h, w, None if k is None or c is None else k * c)


@keras.saving.register_keras_serializable(package="sr")
class TargetFrameInit(keras.initializers.Initializer):
    """Kernel ``[kh, kw, k C, F]`` of a fusion convolution: Glorot-uniform with the fan-in of one
    frame (``kh kw C``) on the target frame's channels, zero on the other frames'.

    It draws exactly what ``GlorotUniform`` draws for the single-frame kernel ``[kh, kw, C, F]``,
    so with the same seed a k-frame model starts as the single-frame model does (same weights in
    every layer, the same output for the same target frame).
    """

    def __init__(self, frames: int, target: int):
        self.frames, self.target = int(frames), int(target)

    def __call__(self, shape, dtype=None):
        kh, kw, kc, filters = shape
        c = kc // self.frames
        single = keras.initializers.GlorotUniform()((kh, kw, c, filters), dtype=dtype)
        parts = [
            single if j == self.target else keras.ops.zeros((kh, kw, c, filters), dtype=dtype)
            for j in range(self.frames)
        ]
        return keras.ops.concatenate(parts, axis=2)

    def get_config(self):
        return {"frames": self.frames, "target": self.target}


def build_espcn_mf(cfg, scale: int, channels: int) -> keras.Model:
    """Build the early-fusion multi-frame ESPCN of ``cfg``'s keys
    (``sr.models.espcn_mf.ESPCNMFConfig``).

    Args:
        scale: upscaling factor r.
        channels: image channels C per frame (1 for the Y channel).
        cfg.frames: k, LR frames per sample (``data.frames``); 1 gives ESPCN.
        cfg.features: filters of the first two convolutions (paper: 64, 32).
        cfg.activation: between convolutions (paper: tanh).
        cfg.target_frame: the frame the output is the SR of, as ``data.target_frame``: ``last``,
            ``center`` or an index 0..k-1 (used by ``fusion_init=target``).
        cfg.fusion_init: ``target`` or ``glorot``, how the fusion convolution starts (module doc).
        cfg.align: ``global``: register every frame to the target frame first
            (:class:`sr.models.align.GlobalAlign`: one sub-pixel translation per frame, phase
            correlation and a Fourier shift); ``none``: fuse the frames as they are.

    Returns:
        Keras model, input float ``[B, k, h, w, C]`` in [0, 1] (``[B, h, w, C]`` when
        ``frames=1``), output float32 ``[B, r h, r w, C]``: the SR of the window's target frame
        (which frame is the data's choice, ``data.target_frame``).
    """
    frames, align, features = cfg.frames, cfg.align, tuple(cfg.features)
    target = target_index(frames, cfg.target_frame)
    if frames == 1:
        lr = keras.Input(shape=(None, None, channels), name="lr")
        x = lr
    else:
        lr = keras.Input(shape=(frames, None, None, channels), name="lr")
        x = GlobalAlign(target, name="align")(lr) if align == "global" else lr
        x = StackFrames(name="early_fusion")(x)
    init = "glorot_uniform"
    if frames > 1 and cfg.fusion_init == "target":
        init = TargetFrameInit(frames, target)
    out = espcn_body(x, scale, channels, features, cfg.activation, first_init=init)
    return keras.Model(lr, out, name=f"espcn_mf{frames}_x{scale}")
