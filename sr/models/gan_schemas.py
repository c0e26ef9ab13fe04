"""The keys of the GAN stage's discriminator: the ``discriminator`` group
(``conf/discriminator/``), with their allowed values, checked by
:func:`sr.core.schema.check_node` at start-up (``sr.config.validate``) before any data or model
work. The defaults are Real-ESRGAN's (``options/train_realesrgan_x4plus.yml``: X. Wang et al.,
ICCV-W 2021; github.com/xinntao/Real-ESRGAN).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sr.core.schema import bounded

DOWNSAMPLING = 8
"""The discriminator's three stride-2 convs (``sr.models.discriminator``): the HR patch's H and W
must be multiples of this (``sr.config.check_adversary``)."""

# The perceptual loss's VGG19 (sr.models.vgg builds it; its term: sr.losses.perceptual).
# Real-ESRGAN's perceptual layers (BasicSR's names; Keras's are block{i}_conv{j})
LAYERS = ("conv1_2", "conv2_2", "conv3_4", "conv4_4", "conv5_4")
WEIGHTS_FILE = "vgg19_weights_tf_dim_ordering_tf_kernels_notop.h5"  # Keras's, Caffe-converted
TORCHVISION_FILE = "vgg19-dcbb9e9d.pth"  # torchvision's: the paper's
TORCHVISION_URL = f"https://download.pytorch.org/models/{TORCHVISION_FILE}"

DISCRIMINATORS = ("sr.models.discriminator.build_unet_discriminator",)


def _target(value) -> str | None:
    if value is None or value in DISCRIMINATORS:
        return None
    return f"must be null (no discriminator) or one of {', '.join(DISCRIMINATORS)}"


def _weight_file(value) -> str | None:
    """Why ``value`` is not a discriminator weight file: a ``.pth`` / ``.safetensors`` file that
    exists (its tensors are read and matched at start-up, ``sr.train.pretrained``)."""
    from sr.core.weightfiles import SUFFIXES  # NumPy: only for a file given

    path = Path(str(value)).expanduser()
    if path.suffix.lower() in SUFFIXES and path.is_file():
        return None
    return f"must be null or an existing PyTorch weight file ({', '.join(SUFFIXES)})"


@dataclass
class DiscriminatorConfig:
    """Keys of the ``discriminator`` group: ``none`` (the default: a pixel loss only) or
    ``unet_sn`` (Real-ESRGAN's U-Net discriminator with spectral norm, and its optimizer)."""

    _target_: str | None = bounded(None, check=_target)  # the builder (null: no discriminator)
    features: int = bounded(64, minimum=1, integer=True)  # channels of its first conv (paper: 64)
    skip_connection: bool = True  # the U-Net's skip connections (paper: true)
    lr: float = bounded(1e-4, minimum=0, above=True)  # its Adam's learning rate (paper: 1e-4)
    beta_1: float = bounded(0.9, minimum=0, maximum=0.999)  # its Adam's beta_1 (paper: 0.9)
    beta_2: float = bounded(0.99, minimum=0, maximum=0.9999)  # its Adam's beta_2 (paper: 0.99)
    # the guard's collapse rule: a log window whose mean discriminator loss (real + fake terms,
    # 2 ln 2 = 1.39 at balance) is below this means it wins and the generator learns nothing
    collapse_loss: float = bounded(0.05, minimum=0)
    # a PyTorch discriminator to start from (Real-ESRGAN's RealESRGAN_x4plus_netD.pth), or null
    init_from: str | None = bounded(None, check=_weight_file)
    # the guard's explosion rule: a log window whose mean discriminator loss is above this (72 x
    # its balance 1.39) means its updates blew up and its GAN term misleads the generator
    explode_loss: float = bounded(100.0, minimum=0, above=True)
