"""SPAN: C. Wan, H. Yu, Z. Li, Y. Chen, Y. Zou, Y. Liu, X. Yin and K. Zuo, "Swift
Parameter-free Attention Network for Efficient Super-Resolution", CVPR Workshops (NTIRE) 2024;
the winner of the NTIRE 2024 efficient SR challenge. Reference code: github.com/hongyuanyu/SPAN
(``basicsr/archs/span_arch.py``).

A head, six swift parameter-free attention blocks (SPAB: three convs with SiLU between them; the
attention is ``sigmoid(h) - 0.5`` of the third conv's output h, with no parameters, and gates
``h + x``), a conv after the last block, a 1x1 fusion of the concatenated head, first block,
last block and the last block's first conv, and one 3x3 conv to ``C s^2`` channels and a pixel
shuffle. The reference's fusion in fact reads that first conv after its SiLU (the block returns
a tensor that its in-place SiLU has overwritten): ``model.fuse_silu=true`` computes so. Every
conv but the fusion and the upsampler is a :class:`Conv3XC`, which the paper trains
over-parameterised and runs as one 3x3 conv.

Parameters of the paper's x4 SPAN (52 features, RGB) as deployed: 498 K (``conf/model/span.yaml``;
48 features: 426 K); :func:`sr.models.complexity.parameters` counts each :class:`Conv3XC` as its
3x3 conv (``tests/test_efficient_models.py``). As in the reference, the input in [0, 1] is
centred and multiplied by 255 (``img_range``): the attention ``(h + x) (sigmoid(h) - 0.5)`` is
about ``h^2 / 4`` for small h, so on inputs of [-0.5, 0.5] the blocks' outputs shrink
quadratically from block to block at initialisation, to exact zeros (and zero gradients) by the
fourth block, where inputs of +-128 keep them alive. By default the centre is 0.5 and the output
gets it back (+0.5, ``model.norm=centre``); the reference subtracts the DIV2K RGB mean (0.40 to
0.45) and adds nothing to the output, which ``model.norm=div2k_mean`` reproduces exactly (the
layout of ``sr.models.span.layout`` builds the released models so); spandrel's variant
without normalisation (its ``no_norm`` buffer) is ``model.norm=none model.img_range=1``.
"""

from __future__ import annotations

import keras

from sr.models.layers import (
    PixelShuffle,
    UpSampling2D,
    float32_output,
    input_mean,
    normalized,
)


@keras.saving.register_keras_serializable(package="sr")
class Conv3XC(keras.layers.Layer):
    """SPAN's re-parameterisable 3x3 conv: ``[B, h, w, C_in] -> [B, h, w, C_out]``, 'same' zero
    padding.

    Trained as the paper's sum of two branches: a 1x1 conv C_in -> g C_in, a 3x3 conv g C_in ->
    g C_out and a 1x1 conv g C_out -> C_out in sequence, plus a 1x1 skip C_in -> C_out (g, the
    gain, is 2). The branches are linear, so their sum is one 3x3 conv; this layer computes that
    conv's kernel and bias from the branches' weights at every call (the reference's
    ``update_params``, a few million multiply-adds) and convolves once. The gradients reach the
    branches' weights through that product, so training follows the over-parameterised model at
    the cost of a single 3x3 conv. The reference's training path pads the input with zeros before
    the first 1x1 conv, whose bias then also reaches the border: the fused bias holds it at every
    pixel, so this is that path exactly.

    Args:
        filters: C_out.
        gain: g, the expansion of the inner 3x3 conv (paper: 2).
    """

    def __init__(self, filters: int, gain: int = 2, **kwargs):
        super().__init__(**kwargs)
        self.filters = int(filters)
        self.gain = int(gain)

    def build(self, input_shape):
        c_in, c_out, g = int(input_shape[-1]), self.filters, self.gain

        def weight(name, shape, init="glorot_uniform"):
            return self.add_weight(name=name, shape=shape, initializer=init)

        self.w1, self.b1 = weight("w1", (c_in, g * c_in)), weight("b1", (g * c_in,), "zeros")
        self.w2 = weight("w2", (3, 3, g * c_in, g * c_out))
        self.b2 = weight("b2", (g * c_out,), "zeros")
        self.w3, self.b3 = weight("w3", (g * c_out, c_out)), weight("b3", (c_out,), "zeros")
        self.w_skip = weight("w_skip", (c_in, c_out))
        self.b_skip = weight("b_skip", (c_out,), "zeros")

    def fused(self):
        """The single conv's ``(kernel [3, 3, C_in, C_out], bias [C_out])``, float32."""
        ops = keras.ops
        kernel = ops.einsum("ia,hwab,bo->hwio", self.w1, self.w2, self.w3)
        centre = ops.pad(
            ops.reshape(self.w_skip, (1, 1) + tuple(self.w_skip.shape)),
            [[1, 1], [1, 1], [0, 0], [0, 0]],
        )
        b = ops.einsum("a,hwab->b", self.b1, self.w2) + self.b2
        bias = ops.matmul(b, self.w3) + self.b3 + self.b_skip
        return kernel + centre, bias

    def deployed_parameters(self) -> int:
        """Parameters of the fused 3x3 conv (the count the paper gives)."""
        return 9 * int(self.w1.shape[0]) * self.filters + self.filters

    def reach(self) -> int:
        """Pixels of its input each output pixel reads beside its own: 1 (one 3x3 conv), for
        the tiler (``sr.inference.receptive_radius``)."""
        return 1

    def deployed(self) -> tuple[keras.layers.Layer, list]:
        """The layer as deployed, a plain 3x3 ``Conv2D`` ('same'), and its weights: the fused
        kernel and bias (``sr.models.layers.deployed``)."""
        kernel, bias = self.fused()
        conv = keras.layers.Conv2D(self.filters, 3, padding="same", name=self.name)
        return conv, [keras.ops.convert_to_numpy(kernel), keras.ops.convert_to_numpy(bias)]

    def call(self, x):
        kernel, bias = self.fused()
        kernel = keras.ops.cast(kernel, x.dtype)
        y = keras.ops.conv(x, kernel, padding="same")
        return y + keras.ops.cast(bias, x.dtype)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.filters,)

    def get_config(self):
        return {**super().get_config(), "filters": self.filters, "gain": self.gain}


def spab(x, features: int):
    """Swift parameter-free attention block: ``(out, first_conv, first_conv_silu)``, each
    ``[B, h, w, features]``: the block's output, its first conv's output and that after its
    SiLU."""
    out1 = Conv3XC(features)(x)
    act1 = keras.layers.Activation("silu")(out1)
    out2 = Conv3XC(features)(act1)
    out3 = Conv3XC(features)(keras.layers.Activation("silu")(out2))
    att = keras.layers.Rescaling(1.0, offset=-0.5)(keras.layers.Activation("sigmoid")(out3))
    out = keras.layers.Multiply()([keras.layers.Add()([out3, x]), att])
    return out, out1, act1


def build_span(cfg, scale: int, channels: int) -> keras.Model:
    """Build SPAN (``conf/model/span.yaml``: the paper's x4 model, 52 features).

    Args:
        cfg: its keys (``sr.models.span.SPANConfig``), each below as ``cfg.<key>``.
        scale: upscaling factor s (any integer >= 2: one pixel shuffle of s).
        channels: image channels C (1 for Y, 3 for RGB).
        features: channels of every block (paper: 52 at x4; the reference code's default 48).
        blocks: SPABs (paper: 6; the fusion reads the first, the last and the last's first conv,
            so at least 1).
        bicubic_skip: add the bicubic upscaling of the input to the output instead of the +0.5
            shift (as VDSR and our ``edsr_lite``); not in the paper.
        img_range: the factor on the centred input (reference: 255).
        norm: what the input loses before ``img_range`` (``sr.models.layers.NORMS``):
            ``centre`` 0.5, given back to the output (+0.5); ``div2k_mean`` the DIV2K RGB mean,
            nothing added to the output (the reference: ``(x - rgb_mean) * img_range``); ``none``
            nothing, nothing added.
        fuse_silu: the fusion reads the last block's first conv after its SiLU, as the
            reference computes (its ``SPAB.forward`` returns ``out1``, which the in-place
            ``SiLU(inplace=True)`` has overwritten); False: before it (the project's models
            trained so far).

    Returns:
        Keras model, input float ``[B, h, w, C]`` in [0, 1], output float32 ``[B, s h, s w, C]``.
    """
    features = cfg.features
    blocks = cfg.blocks
    bicubic_skip = cfg.bicubic_skip
    img_range = cfg.img_range
    norm = cfg.norm
    fuse_silu = cfg.fuse_silu
    mean = input_mean(norm, channels)
    lr = keras.Input(shape=(None, None, channels), name="lr")
    x = normalized(lr, mean, img_range)
    head = Conv3XC(features)(x)
    out, first = head, None
    for _ in range(blocks):
        out, out1, act1 = spab(out, features)
        first = out if first is None else first
    out = Conv3XC(features)(out)
    x = keras.layers.Concatenate()([head, out, first, act1 if fuse_silu else out1])
    x = keras.layers.Conv2D(features, 1)(x)
    x = keras.layers.Conv2D(channels * scale * scale, 3, padding="same")(x)
    x = PixelShuffle(scale)(x)
    if bicubic_skip:
        x = keras.layers.Add()([x, UpSampling2D(scale, interpolation="bicubic")(lr)])
    elif norm == "centre":
        x = keras.layers.Rescaling(1.0, offset=0.5)(x)
    return keras.Model(lr, float32_output(x), name=f"span_x{scale}")
