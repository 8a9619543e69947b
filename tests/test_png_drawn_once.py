"""PNGs rasterised once (attn_cli.render.files._png_drawn_once) against savefig's tight box."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from attn_cli.render import files


def _figure(title: str, width: float = 6.0):
    from attn_cli.render.figures import new_figure

    fig, ax = new_figure(figsize=(width, 3.0))
    ax.imshow(np.arange(24.0).reshape(4, 6), cmap="Blues", aspect="auto")
    ax.plot([0, 5], [0, 3], "r-")
    ax.set_title(title)
    ax.set_xlabel("input position")
    fig.tight_layout()
    return fig


def _pixels(data) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGBA")).astype(int)


def _both(fig, tmp_path, dpi=120):
    """(this path's PNG, savefig's PNG) of the same figure, at ``dpi``."""
    import matplotlib.pyplot as plt

    once = tmp_path / "once.png"
    fig.set_dpi(dpi)
    assert files._png_drawn_once(fig, once, dpi, {"k": "v"})
    fig.set_dpi(100)
    ref = io.BytesIO()
    fig.savefig(ref, dpi=dpi, bbox_inches="tight", format="png", metadata={"k": "v"})
    plt.close(fig)
    return once.read_bytes(), ref.getvalue()


def test_a_figure_inside_its_canvas_is_savefigs_crop(tmp_path):
    mine, ref = _both(_figure("inside"), tmp_path)
    a, b = _pixels(mine), _pixels(ref)
    assert a.shape == b.shape  # the size of savefig's tight canvas
    differ = (np.abs(a - b).sum(-1) > 0).mean()
    assert differ < 0.05, f"{differ:.1%} of the pixels differ (edges a fraction of a pixel apart at most)"
    gap = np.abs(a - b).mean()
    # aligned to the pixel: each crop one pixel off (up, down, left, right) is further from savefig's
    for off in (np.abs(a[1:] - b[:-1]), np.abs(a[:-1] - b[1:]), np.abs(a[:, 1:] - b[:, :-1]), np.abs(a[:, :-1] - b[:, 1:])):
        assert off.mean() > 1.5 * gap
    assert Image.open(io.BytesIO(mine)).info["k"] == "v"  # the text chunk kept


def test_a_title_wider_than_the_figure_gives_savefigs_pixels(tmp_path):
    fig = _figure("a title much wider than this narrow figure, so the tight box reaches past the canvas", 3.0)
    mine, ref = _both(fig, tmp_path)
    a, b = _pixels(mine), _pixels(ref)
    assert a.shape == b.shape and a.shape[1] > 3.0 * 120  # grown past the figure, like savefig
    assert (a == b).all()


def test_a_figure_off_aggs_canvas_is_left_to_savefig(tmp_path):
    from matplotlib.backend_bases import FigureCanvasBase
    from matplotlib.figure import Figure

    fig = Figure(figsize=(2, 2))
    FigureCanvasBase(fig)
    fig.add_subplot().plot([0, 1])
    assert not files._png_drawn_once(fig, tmp_path / "x.png", 120, None)
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize("dpi", [72, 120])
def test_save_figure_restores_the_figures_dpi(tmp_path, dpi):
    fig = _figure("dpi")
    before = fig.dpi
    import matplotlib.pyplot as plt

    files._save_formats(fig, tmp_path / "d.png", ["png"], dpi, None, {})
    assert fig.dpi == before
    plt.close(fig)
    with Image.open(tmp_path / "d.png") as image:
        assert image.info["dpi"][0] == pytest.approx(dpi, abs=0.5)


@pytest.mark.parametrize("transparent", [False, True])
def test_an_opaque_figure_is_written_as_rgb_with_savefigs_chunks(tmp_path, transparent):
    import matplotlib

    fig = _figure("rgb")
    if transparent:
        fig.patch.set_alpha(0.0)
    mine, ref = _both(fig, tmp_path)
    image, reference = Image.open(io.BytesIO(mine)), Image.open(io.BytesIO(ref))
    assert image.mode == ("RGBA" if transparent else "RGB") and reference.mode == "RGBA"
    assert image.info["Software"] == reference.info["Software"] == (
        f"Matplotlib version{matplotlib.__version__}, https://matplotlib.org/")
    assert image.info["k"] == "v"
    assert image.info["dpi"] == pytest.approx(reference.info["dpi"])
    if not transparent:
        assert (_pixels(ref)[..., 3] == 255).all()  # savefig's alpha, dropped: nothing lost


def test_a_constrained_layout_is_saved_as_savefig_saves_it(tmp_path):
    """Constrained layout sizes a shared colorbar over savefig's two drawings: drawn once, the
    embeddings' colorbar came out three times as wide.  Such a figure goes to savefig."""
    import matplotlib.pyplot as plt

    from attn_cli.render.figures import new_figure

    def make():
        fig, axes = new_figure(1, 2, figsize=(10.4, 4.6), layout="constrained")
        for ax in axes:
            im = ax.imshow(np.linspace(0, 1, 25).reshape(5, 5), cmap="Blues", vmin=0, vmax=1)
            ax.set_title("a title")
        fig.colorbar(im, ax=list(axes), label="attention weight", shrink=0.85)
        return fig

    fig = make()
    files._save_formats(fig, tmp_path / "c.png", ["png"], 120, None, None)
    plt.close(fig)
    fig = make()
    ref = io.BytesIO()
    fig.savefig(ref, dpi=120, bbox_inches="tight", format="png")
    plt.close(fig)
    a, b = _pixels((tmp_path / "c.png").read_bytes()), _pixels(ref.getvalue())
    assert a.shape == b.shape and (a == b).all()


@pytest.mark.parametrize("cells", [1, 4, 8])
def test_heatmap_values_are_left_out_of_the_layout_with_the_same_pixels(tmp_path, cells):
    """The values written in a heatmap's cells (the copy task's maps up to length 8, the masks,
    the embeddings) are inside the axes, so leaving them out of tight_layout and the tight box
    changes no pixel; counted in, as before, the figure is laid out and cropped the same."""
    from attn_cli.render.figures import heatmap, new_figure

    labels = [str(i % 10) for i in range(cells)]
    weights = np.linspace(0.0, 1.0, cells * cells).reshape(cells, cells).tolist()
    saved = []
    for counted in (False, True):
        size = 3 + 0.28 * cells  # the copy task's map
        fig, ax = new_figure(figsize=(size + 1.2, size))
        heatmap(ax, weights, labels, labels, annotate=True)
        ax.set_title("weights, one value per cell")
        assert len(ax.texts) == cells * cells
        assert not any(t.get_in_layout() for t in ax.texts)  # heatmap leaves them out
        for t in ax.texts:
            t.set_in_layout(counted)
        path = tmp_path / f"{counted}.png"
        files.save_figure(fig, path, tight_layout={})
        saved.append(np.asarray(Image.open(path)))
    assert saved[0].shape == saved[1].shape
    assert np.array_equal(saved[0], saved[1])


def test_a_box_laid_out_beforehand_is_the_box_saved(tmp_path):
    """lay_out's box, given to the save, crops as savefig(bbox_inches=box) does and as the box
    measured at the save: a frame laid out once is saved without measuring its texts again."""
    import matplotlib.pyplot as plt

    fig = _figure("laid out once")
    box = files.lay_out(fig)
    assert fig.dpi == 100  # the figure's own dpi kept
    paths = files.save_figure(fig, tmp_path / "boxed.png", ("png", "svg"), box=box)
    assert [p.name for p in paths] == ["boxed.png", "boxed.svg"]
    fig = _figure("laid out once")
    measured = files.save_figure(fig, tmp_path / "measured.png", ("png",), tight_layout={})
    assert _pixels(paths[0].read_bytes()).shape == _pixels(measured[0].read_bytes()).shape
    assert (_pixels(paths[0].read_bytes()) == _pixels(measured[0].read_bytes())).all()
    # a box that is not the figure's crops where it is told: the bytes follow the box
    fig = _figure("laid out once")
    files.lay_out(fig)
    small = files.save_figure(fig, tmp_path / "small.png", ("png",), box=box.shrunk(0.5, 0.5))
    assert _pixels(small[0].read_bytes()).shape[1] < _pixels(measured[0].read_bytes()).shape[1]
    plt.close("all")
