"""``loss.terms.fft``: the focal frequency loss (L. Jiang, B. Dai, W. Wu and C. C. Loy, "Focal
Frequency Loss for Image Reconstruction and Synthesis", ICCV 2021), as traiNNer-redux computes
it (``ffloss``, ``traiNNer/losses/focal_frequency_loss.py``, class ``FFLoss``, whose defaults
these are; github.com/the-database/traiNNer-redux):

1. each image ``[H, W]`` per channel, cut into ``patch_factor^2`` patches, goes through the 2-D
   DFT with orthonormal scaling (``torch.fft.fft2(norm="ortho")``);
2. with ``ave_spectrum``, the spectra are averaged over the batch first (traiNNer-redux's
   default; the paper's code defaults to off);
3. the spectrum weight matrix is ``|F_SR - F_HR|^alpha`` (``log(1 + .)`` with ``log_matrix``),
   divided by its maximum over each patch's frequencies (over the whole batch with
   ``batch_matrix``), NaN set to 0, clipped to [0, 1], without gradient;
4. the loss is ``50 * mean(weight * |F_SR - F_HR|^2)`` (traiNNer-redux's factor 50).

Per example (``[B]``) it is the mean over that example's patches, channels and frequencies;
with ``ave_spectrum`` there is one value for the (replica's) batch, given to each example.
"""

from __future__ import annotations

from dataclasses import dataclass

from sr.core.schema import bounded
from sr.losses.base import Term
from sr.losses.registry import TermConfig, TermSpec, register

SCALE = 50.0  # traiNNer-redux's factor


@dataclass
class FFTConfig(TermConfig):
    """Keys of ``loss.terms.fft`` (defaults: traiNNer-redux's ``ffloss``)."""

    alpha: float = bounded(1.0, minimum=0)  # exponent of the spectrum weight matrix
    # the image is cut into patch_factor^2 patches, each its own spectrum (must divide the patch)
    patch_factor: int = bounded(1, minimum=1, integer=True)
    ave_spectrum: bool = True  # compare the batch's mean spectra (traiNNer-redux's default)
    log_matrix: bool = False  # the weight matrix is log(1 + |F_SR - F_HR|^alpha)
    batch_matrix: bool = False  # normalise the weight matrix by its maximum over the batch


class FFT(Term):
    """The focal frequency term: ``[B]`` float32 of ``hr``, ``sr`` float32 ``[B, H, W, C]`` in
    [0, 1]; H and W multiples of ``patch_factor``."""

    name = "fft"

    def __init__(self, settings):
        super().__init__(settings)
        self.alpha, self.patch = float(settings.alpha), int(settings.patch_factor)
        self.ave_spectrum, self.log_matrix = bool(settings.ave_spectrum), bool(settings.log_matrix)
        self.batch_matrix = bool(settings.batch_matrix)

    def spectrum(self, x):
        """The orthonormal 2-D DFT of each patch of ``x`` ``[B, H, W, C]``: complex64
        ``[B, P, C, H / p, W / p]``, P = p^2 patches in row-major order (traiNNer-redux's
        ``tensor2freq``).

        Raises:
            ValueError: H or W is not a multiple of ``patch_factor``.
        """
        import tensorflow as tf

        p = self.patch
        _, h, w, c = x.shape
        if h is not None and w is not None and (h % p or w % p):
            raise ValueError(f"loss.terms.fft.patch_factor={p} must divide the HR patch's {h}x{w}")
        x = tf.transpose(tf.cast(x, tf.float32), [0, 3, 1, 2])  # [B, C, H, W]
        b, hp, wp = tf.shape(x)[0], tf.shape(x)[2] // p, tf.shape(x)[3] // p
        x = tf.reshape(x, [b, -1, p, hp, p, wp])
        x = tf.reshape(tf.transpose(x, [0, 2, 4, 1, 3, 5]), [b, p * p, -1, hp, wp])
        norm = tf.sqrt(tf.cast(hp * wp, tf.float32))
        return tf.signal.fft2d(tf.complex(x, tf.zeros_like(x))) / tf.complex(norm, 0.0)

    def __call__(self, hr, sr):
        import tensorflow as tf

        f_sr, f_hr = self.spectrum(sr), self.spectrum(hr)
        batch = tf.shape(f_sr)[0]
        if self.ave_spectrum:
            f_sr = tf.reduce_mean(f_sr, axis=0, keepdims=True)
            f_hr = tf.reduce_mean(f_hr, axis=0, keepdims=True)
        diff = f_sr - f_hr
        distance = tf.square(tf.math.real(diff)) + tf.square(tf.math.imag(diff))
        weight = tf.pow(tf.sqrt(distance), self.alpha)
        if self.log_matrix:
            weight = tf.math.log(weight + 1.0)
        if self.batch_matrix:
            weight = weight / tf.reduce_max(weight)
        else:
            weight = weight / tf.reduce_max(weight, axis=[-2, -1], keepdims=True)
        weight = tf.where(tf.math.is_nan(weight), tf.zeros_like(weight), weight)
        weight = tf.stop_gradient(tf.clip_by_value(weight, 0.0, 1.0))
        values = SCALE * tf.reduce_mean(weight * distance, axis=[1, 2, 3, 4])
        return values + tf.zeros([batch], tf.float32)  # one value per example (ave_spectrum: [1])


SPEC = register(TermSpec("fft", FFTConfig, FFT, kind="pixel"))
