import numpy as np
import pytest

from sr.models import build_edsr_baseline, build_espcn


@pytest.mark.parametrize("build", [build_espcn, build_edsr_baseline])
@pytest.mark.parametrize("h, w", [(24, 24), (17, 23)])
def test_any_size_in_4x_out(build, h, w):
    model = build(scale=4)
    out = model(np.random.default_rng(0).random((2, h, w, 1), dtype=np.float32))
    assert out.shape == (2, 4 * h, 4 * w, 1) and out.dtype == "float32"


def test_sizes_match_the_papers():
    # ESPCN (Shi 2016): 5x5x64, 3x3x32, 3x3x16 on one channel
    assert build_espcn().count_params() == (25 * 64 + 64) + (9 * 64 * 32 + 32) + (9 * 32 * 16 + 16)
    # EDSR baseline (Lim 2017): about 1.5 M parameters (the paper's RGB model: 1.52 M)
    assert 1.49e6 < build_edsr_baseline().count_params() < 1.53e6


def test_espcn_output_is_a_pixel_shuffle_of_the_last_convolution():
    model = build_espcn(scale=2, features=(4, 4))
    x = np.random.default_rng(1).random((1, 5, 6, 1), dtype=np.float32)
    conv = model.layers[-3]  # last Conv2D, before PixelShuffle and the float32 output
    import keras

    feats = keras.Model(model.input, conv.output)(x).numpy()  # [1, 5, 6, 4]
    out = model(x).numpy()
    # depth_to_space: out[2i + a, 2j + b] = feats[i, j, 2a + b]
    np.testing.assert_allclose(out[0, 1::2, 0::2, 0], feats[0, :, :, 2], rtol=1e-6)
    np.testing.assert_allclose(out[0, 0::2, 1::2, 0], feats[0, :, :, 1], rtol=1e-6)


def test_edsr_rejects_unsupported_scale():
    with pytest.raises(ValueError, match="scales 2, 3, 4 and 8"):
        build_edsr_baseline(scale=5)
