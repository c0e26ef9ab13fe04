"""Multi-frame ESPCN by early fusion: J. Caballero, C. Ledig, A. Aitken, A. Acosta, J. Totz,
Z. Wang, W. Shi, "Real-Time Video Super-Resolution with Spatio-Temporal Networks and Motion
Compensation" (VESPCN), CVPR 2017, section 3.1.

Early fusion stacks the k LR frames of a window along the channel axis, so the first convolution
sees all of them at once and collapses the temporal dimension; the rest is ESPCN (Shi et al.,
CVPR 2016: 5x5 with 64 filters, 3x3 with 32, 3x3 with r^2 C, tanh between them, pixel shuffle).
This is VESPCN's early-fusion network without its motion-compensation module: it is alignment-free
and learns to use the neighbours' sub-pixel shifts within its receptive field (4 LR pixels from
the centre), which suits bursts and slow camera motion; large motion needs alignment.

With ``frames=1`` the model is ESPCN itself (input ``[B, h, w, C]``), so that a single-frame run
(``data.frames=1``) trains the same network on the same data for comparison.
"""

from __future__ import annotations

import keras

from sr.models.espcn import espcn_body


@keras.saving.register_keras_serializable(package="sr")
class StackFrames(keras.layers.Layer):
    """``[B, k, h, w, C]`` to ``[B, h, w, k C]``: frame j's channels at ``j C .. j C + C - 1``."""

    def call(self, x):
        shape = keras.ops.shape(x)
        x = keras.ops.transpose(x, (0, 2, 3, 1, 4))
        return keras.ops.reshape(x, (shape[0], shape[2], shape[3], shape[1] * shape[4]))

    def compute_output_shape(self, shape):
        b, k, h, w, c = shape
        return (b, h, w, None if k is None or c is None else k * c)


def build_espcn_mf(
    scale: int = 4,
    frames: int = 3,
    channels: int = 1,
    features: tuple[int, int] = (64, 32),
    activation: str = "tanh",
) -> keras.Model:
    """Build the early-fusion multi-frame ESPCN.

    Args:
        scale: upscaling factor r.
        frames: k, LR frames per sample (``data.frames``); 1 gives ESPCN.
        channels: image channels C per frame (1 for the Y channel).
        features: filters of the first two convolutions (paper: 64, 32).
        activation: between convolutions (paper: tanh).

    Returns:
        Keras model, input float ``[B, k, h, w, C]`` in [0, 1] (``[B, h, w, C]`` when
        ``frames=1``), output float32 ``[B, r h, r w, C]``: the SR of the window's target frame
        (which frame is the data's choice, ``data.target_frame``).

    Raises:
        ValueError: if ``frames`` < 1.
    """
    if frames < 1:
        raise ValueError(f"frames must be >= 1 (data.frames), got {frames}")
    if frames == 1:
        lr = keras.Input(shape=(None, None, channels), name="lr")
        x = lr
    else:
        lr = keras.Input(shape=(frames, None, None, channels), name="lr")
        x = StackFrames(name="early_fusion")(lr)
    out = espcn_body(x, scale, channels, features, activation)
    return keras.Model(lr, out, name=f"espcn_mf{frames}_x{scale}")
