"""attn's PNG writer (attn_cli/render/png.py): Pillow reads back the same pixels, text and dpi."""

import io

import numpy as np
import pytest
from PIL import Image

from attn_cli.render import png


def _read(data: bytes):
    image = Image.open(io.BytesIO(data))
    image.load()
    Image.open(io.BytesIO(data)).verify()  # every chunk's CRC
    return image


def _figure_like(channels: int, seed: int = 0) -> np.ndarray:
    """(H, W, C): flat blocks, noise and a wrap-around step (255 above 0), as figures have."""
    rng = np.random.default_rng(seed)
    pixels = np.full((37, 53, channels), 255, np.uint8)
    pixels[5:20, 7:30] = rng.integers(0, 256, (15, 23, channels), dtype=np.uint8)
    pixels[20:, 30:] = 0
    pixels[25, :] = 17
    return pixels


@pytest.mark.parametrize("channels, mode", [(3, "RGB"), (4, "RGBA")])
def test_pillow_reads_back_the_same_pixels(channels, mode):
    pixels = _figure_like(channels)
    image = _read(png.encode(pixels))
    assert image.mode == mode
    assert np.array_equal(np.asarray(image), pixels)


def test_a_strided_view_is_written_as_its_pixels():
    """The tight box's crop of an RGBA canvas, alpha dropped: a view with strides."""
    canvas = _figure_like(4, seed=1)
    view = canvas[3:30, 2:40, :3]
    assert not view.flags.c_contiguous
    assert np.array_equal(np.asarray(_read(png.encode(view))), view)


def test_text_chunks_and_dpi_as_pillow_writes_them():
    text = {"Software": "Matplotlib version3.11.2, https://matplotlib.org/", "attn-digest": "ab" * 32,
            "title": "Zürich", "caption": "√d_k ≈ 8"}  # Latin-1 as tEXt, the rest as iTXt
    data = png.encode(_figure_like(3), dpi=120, text=text)
    image = _read(data)
    assert {k: image.info[k] for k in text} == text
    assert image.info["dpi"] == pytest.approx((120, 120), abs=0.05)  # pixels per metre, rounded
    assert b"tEXtcaption" not in data and b"iTXtcaption" in data and b"tEXttitle" in data
    reference = io.BytesIO()  # Pillow's own: the same dpi
    Image.fromarray(_figure_like(3)).save(reference, format="png", dpi=(120, 120))
    assert Image.open(reference).info["dpi"] == image.info["dpi"]


def test_the_filter_is_what_the_header_says(monkeypatch):
    """The rows are "up"-filtered: declared as another filter (none), they read back wrong."""
    pixels = _figure_like(3)
    monkeypatch.setattr(png, "_UP", 0)
    assert not np.array_equal(np.asarray(_read(png.encode(pixels))), pixels)


@pytest.mark.parametrize("bad", [np.zeros((4, 4), np.uint8), np.zeros((4, 4, 2), np.uint8),
                                 np.zeros((4, 4, 3), np.float32), np.zeros((0, 4, 3), np.uint8)])
def test_refuses_what_is_not_a_picture(bad):
    with pytest.raises(ValueError):
        png.encode(bad)
