"""Blur kernels of Real-ESRGAN's degradation and the blurs that apply them, in TensorFlow ops.

Source: BasicSR ``basicsr/data/degradations.py`` (the kernel families of Real-ESRGAN, Wang et
al., ICCV-W 2021, and of BSRGAN, Zhang et al., ICCV 2021) and ``basicsr/utils/img_process_util.py``
(``filter2D``). Every kernel is float32 on a 21 x 21 grid (a smaller side zero-padded to 21, as
the official code pads), sums to 1, and may carry any leading batch shape (one kernel per image,
drawn from its row of the batch's uniforms, :class:`Draws`). Used by
``sr.degradations.realesrgan``.
"""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

from sr.degradations.realesrgan_params import KERNEL_SIZE, KERNEL_TYPES  # noqa: F401  (re-exported)


# ------------------------------------------------------------------------------------------------
# Random draws: the scalars of an image from one vector of uniforms, its noise fields from seeds
# ------------------------------------------------------------------------------------------------
class Draws:
    """The random numbers of one image (or of a batch of images, one per image): scalar draws
    taken in turn from a vector of uniforms drawn once (one op instead of one per draw), the
    noise fields from seeds folded from the image's seed.

    Args:
        uniforms: float32 ``[..., K]`` uniforms in [0, 1): K draws per image.
        seed: int64 ``[2]`` seed of the image's noise fields (:meth:`seed`), or None for a batch
            (kernels only).
    """

    def __init__(self, uniforms: tf.Tensor, seed=None):
        self.u, self.key = uniforms, seed
        self.n = self.k = 0

    def next(self) -> tf.Tensor:
        """The next unused uniform, float32 ``[...]``.

        Raises:
            IndexError: when more than K were taken (a programming error: raise the count).
        """
        if self.n >= self.u.shape[-1]:
            raise IndexError(f"only {self.u.shape[-1]} draws were made")
        self.n += 1
        return self.u[..., self.n - 1]

    def seed(self) -> tf.Tensor:
        """A fresh int64 ``[2]`` seed folded from the image's seed (for a noise field)."""
        self.k += 1
        return tf.random.experimental.stateless_fold_in(self.key, self.k)

    def uniform(self, low=0.0, high=1.0) -> tf.Tensor:
        """float32 ``[...]`` uniform in [low, high)."""
        return low + (high - low) * self.next()

    def chance(self, p: float) -> tf.Tensor:
        """bool ``[...]``, true with probability ``p``."""
        return self.next() < p

    def choice(self, probs) -> tf.Tensor:
        """int32 ``[...]`` index drawn with probabilities ``probs`` (by the cumulative sums)."""
        edges = tf.constant(np.cumsum(probs)[:-1], tf.float32)
        return tf.reduce_sum(tf.cast(self.next()[..., tf.newaxis] >= edges, tf.int32), -1)

    def beta(self, low: float, high: float) -> tf.Tensor:
        """Real-ESRGAN's shape parameter: uniform in [low, 1) or [1, high), one half each."""
        below, a, b = self.chance(0.5), self.uniform(low, 1.0), self.uniform(1.0, high)
        return tf.where(below, a, b)


def _map(x) -> tf.Tensor:
    """A per-image value ``[...]`` as ``[..., 1, 1]``, to broadcast over a kernel's grid."""
    return tf.convert_to_tensor(x, tf.float32)[..., tf.newaxis, tf.newaxis]


# ------------------------------------------------------------------------------------------------
# Kernels (BasicSR ``degradations.py``), on the 21 x 21 grid; any leading batch shape
# ------------------------------------------------------------------------------------------------
def _grid() -> tuple[tf.Tensor, tf.Tensor]:
    """float32 ``[21, 21]`` x (column) and y (row) offsets from the centre, as BasicSR's
    ``mesh_grid``."""
    ax = np.arange(KERNEL_SIZE, dtype=np.float32) - KERNEL_SIZE // 2
    xx, yy = np.meshgrid(ax, ax)
    return tf.constant(xx), tf.constant(yy)


def _crop_to(kernel: tf.Tensor, size) -> tf.Tensor:
    """``kernel`` ``[..., 21, 21]`` zero outside its central ``size`` x ``size`` (``size``
    ``[...]``), normalised to sum 1 (a kernel of that side padded to 21, as the official code
    pads)."""
    xx, yy = _grid()
    half = _map(tf.cast(tf.cast(size, tf.int32) // 2, tf.float32))
    inside = tf.logical_and(tf.abs(xx) <= half, tf.abs(yy) <= half)
    kernel = tf.where(inside, kernel, 0.0)
    return kernel / tf.reduce_sum(kernel, axis=[-2, -1], keepdims=True)


def quadratic_form(sigma_x, sigma_y, theta) -> tf.Tensor:
    """``[x y] Sigma^-1 [x y]^T`` on the grid, ``Sigma = R diag(sx^2, sy^2) R^T`` with R the
    rotation by ``theta`` (radians): BasicSR's ``sigma_matrix2`` and ``pdf2``. float32
    ``[..., 21, 21]`` for ``[...]`` parameters."""
    xx, yy = _grid()
    sigma_x, sigma_y, theta = _map(sigma_x), _map(sigma_y), _map(theta)
    c, s = tf.cos(theta), tf.sin(theta)
    a, b = 1.0 / tf.square(sigma_x), 1.0 / tf.square(sigma_y)  # inverse in the rotated frame
    inv_xx = c * c * a + s * s * b
    inv_yy = s * s * a + c * c * b
    inv_xy = c * s * (a - b)
    return inv_xx * xx * xx + 2.0 * inv_xy * xx * yy + inv_yy * yy * yy


def _gaussian(q: tf.Tensor) -> tf.Tensor:
    return tf.exp(-0.5 * q)


def _generalized(q: tf.Tensor, beta: tf.Tensor) -> tf.Tensor:
    return tf.exp(-0.5 * tf.pow(q, beta))


def _plateau(q: tf.Tensor, beta: tf.Tensor) -> tf.Tensor:
    return 1.0 / (1.0 + tf.pow(q, beta))


def gaussian_kernel(size, sigma_x, sigma_y, theta) -> tf.Tensor:
    """Bivariate Gaussian ``exp(-q / 2)``, side ``size`` padded to 21, sums to 1. float32."""
    return _crop_to(_gaussian(quadratic_form(sigma_x, sigma_y, theta)), size)


def generalized_kernel(size, sigma_x, sigma_y, theta, beta) -> tf.Tensor:
    """Generalized Gaussian ``exp(-(q^beta) / 2)`` (BasicSR's ``bivariate_generalized_Gaussian``;
    beta = 1 is the Gaussian), padded to 21, sums to 1. float32 ``[..., 21, 21]``."""
    return _crop_to(_generalized(quadratic_form(sigma_x, sigma_y, theta), _map(beta)), size)


def plateau_kernel(size, sigma_x, sigma_y, theta, beta) -> tf.Tensor:
    """Plateau ``1 / (1 + q^beta)`` (BasicSR's ``bivariate_plateau``), padded to 21, sums to 1.
    float32 ``[..., 21, 21]``."""
    return _crop_to(_plateau(quadratic_form(sigma_x, sigma_y, theta), _map(beta)), size)


def sinc_kernel(size, cutoff) -> tf.Tensor:
    """2-D circular low-pass ``w_c J1(w_c r) / (2 pi r)``, ``w_c^2 / (4 pi)`` at the centre
    (BasicSR's ``circular_lowpass_kernel``; ``cutoff`` w_c in radians, pi = no filtering of the
    sampled band), side ``size`` padded to 21, sums to 1. float32 ``[..., 21, 21]``."""
    xx, yy = _grid()
    r = tf.sqrt(xx * xx + yy * yy)
    safe = tf.where(r > 0, r, 1.0)
    cutoff = _map(cutoff)
    k = cutoff * tf.math.special.bessel_j1(cutoff * safe) / (2.0 * math.pi * safe)
    k = tf.where(r > 0, k, tf.square(cutoff) / (4.0 * math.pi))
    return _crop_to(k, size)


def _side(draws: Draws, sizes) -> tf.Tensor:
    """A kernel side drawn uniformly from ``sizes``, int32 ``[...]``."""
    return tf.gather(tf.constant(sizes, tf.int32), draws.choice([1 / len(sizes)] * len(sizes)))


def random_kernel(draws: Draws, stage: dict, sizes) -> tf.Tensor:
    """One stage's blur kernel (``realesrgan_dataset.py``): a side drawn from ``sizes``; with
    ``sinc_prob`` a sinc of cutoff in [pi/3, pi] (side < 13) or [pi/5, pi]; else a family drawn by
    ``kernel_prob`` with sigmas from ``blur_sigma``, angle in [-pi, pi] (anisotropic ones) and
    beta from ``betag_range`` / ``betap_range``. float32 ``[..., 21, 21]``, each sums to 1."""
    size, family = _side(draws, sizes), draws.choice(stage["kernel_prob"])
    lo, hi = stage["blur_sigma"]
    sigma_x, sigma_y, theta = draws.uniform(lo, hi), draws.uniform(lo, hi), draws.uniform()
    aniso = tf.equal(family % 2, 1)  # the *_aniso entries of KERNEL_TYPES
    sigma_y = tf.where(aniso, sigma_y, sigma_x)
    theta = tf.where(aniso, theta * 2 * math.pi - math.pi, 0.0)
    q = quadratic_form(sigma_x, sigma_y, theta)
    betag, betap = _map(draws.beta(*stage["betag_range"])), _map(draws.beta(*stage["betap_range"]))
    kernels = tf.stack([_gaussian(q), _generalized(q, betag), _plateau(q, betap)], -3)
    weights = tf.one_hot(family // 2, 3)[..., tf.newaxis, tf.newaxis]  # Gaussian, gen., plateau
    kernel = _crop_to(tf.reduce_sum(kernels * weights, -3), size)
    low = tf.where(size < 13, math.pi / 3, math.pi / 5)
    sinc = sinc_kernel(size, low + draws.uniform() * (math.pi - low))
    use_sinc = draws.chance(stage["sinc_prob"])[..., tf.newaxis, tf.newaxis]
    return tf.where(use_sinc, sinc, kernel)


def final_sinc(draws: Draws, sizes, prob: float) -> tf.Tensor:
    """The final sinc filter: with probability ``prob`` a sinc of a side drawn from ``sizes`` and
    a cutoff in [pi/3, pi], else the identity (a centred pulse). float32 ``[..., 21, 21]``."""
    sinc = sinc_kernel(_side(draws, sizes), draws.uniform(math.pi / 3, math.pi))
    pulse = tf.one_hot(KERNEL_SIZE // 2, KERNEL_SIZE)
    pulse = pulse[:, tf.newaxis] * pulse[tf.newaxis, :]
    return tf.where(draws.chance(prob)[..., tf.newaxis, tf.newaxis], sinc, pulse)


def blur_batch(images: tf.Tensor, kernels: tf.Tensor) -> tf.Tensor:
    """Correlate every channel of image i of ``images`` ``[B, H, W, C]`` with ``kernels[i]``
    (``[B, 21, 21]``), borders reflected (BasicSR's ``filter2D``: PyTorch ``reflect`` = OpenCV
    ``BORDER_REFLECT_101``); H, W >= 11. One depthwise convolution over the B C planes (many
    channels vectorise; 3 do not). Same shape, float32."""
    pad = KERNEL_SIZE // 2
    x = tf.pad(images, [[0, 0], [pad, pad], [pad, pad], [0, 0]], mode="REFLECT")
    shape = tf.shape(x)
    b, c = shape[0], images.shape[-1]
    planes = tf.reshape(tf.transpose(x, [1, 2, 0, 3]), [1, shape[1], shape[2], b * c])
    k = tf.repeat(tf.transpose(kernels, [1, 2, 0]), c, axis=-1)[..., tf.newaxis]
    out = tf.nn.depthwise_conv2d(planes, k, [1, 1, 1, 1], "VALID")[0]  # [H, W, B C]
    out = tf.reshape(out, [shape[1] - 2 * pad, shape[2] - 2 * pad, b, c])
    return tf.transpose(out, [2, 0, 1, 3])
