"""Figures built before their numbers (attn_cli/render/frames.py): the copy task's maps."""

import random

import pytest

from attn_cli.experiments.copy_task import Config
from attn_cli.render import copy_task as render
from attn_cli.render import frames


def _map(length: int, seed: int = 0) -> dict:
    """A map's numbers as the copy task's Result holds them (rows sum to 1)."""
    rng = random.Random(seed)
    rows = [[rng.random() for _ in range(length)] for _ in range(length)]
    weights = [[x / sum(row) for x in row] for row in rows]
    return {"length": length, "src": [rng.randrange(10) for _ in range(length)], "weights": weights,
            "diagonal": 0.5, "diagonal_all": 0.625, "free_running": 0.25, "seed": 0}


FORMATS = ("png", "svg", "pdf")


def _drawn(tmp_path, m: dict, name: str, formats=FORMATS) -> list[bytes]:
    """The map's files in every format, their bytes."""
    path = tmp_path / name / "map.png"
    path.parent.mkdir()
    written = render._map_figure(m, path, "digest", formats)
    assert written == [path.with_suffix("." + f) for f in formats]
    return [p.read_bytes() for p in written]


@pytest.fixture(autouse=True)
def _empty_store():
    frames.clear()
    yield
    frames.clear()


@pytest.mark.parametrize("length", [4, 32, 60])  # annotated; every tick labelled; every 3rd (> 48)
def test_a_map_finished_from_its_frame_is_the_map_built_at_once(tmp_path, length):
    m = _map(length)
    at_once = _drawn(tmp_path, m, "at-once")
    render.prepare(Config(lengths=(length,), model="attention"), FORMATS)
    assert frames._FRAMES  # kept, then taken by the figure
    assert _drawn(tmp_path, m, "from-frame") == at_once
    assert not frames._FRAMES


def test_a_frame_of_another_shape_is_not_the_map(tmp_path):
    """The byte comparison above can fail: a frame built for length 5, kept as length 4's."""
    m = _map(4)
    at_once = _drawn(tmp_path, m, "at-once")
    frames.keep((render.MAP_FRAME, 4), render._map_frame(5))
    with pytest.raises(ValueError, match="does not match the number of labels"):  # 4 labels, 5 ticks
        _drawn(tmp_path, m, "wrong")
    import matplotlib.pyplot as plt

    plt.close("all")  # the figure that failed
    frames.keep((render.MAP_FRAME, 4), render._map_frame(4))
    frames._FRAMES[(render.MAP_FRAME, 4)][1].set_xlabel("another label")
    relabelled = _drawn(tmp_path, m, "relabelled")
    assert all(a != b for a, b in zip(relabelled, at_once))


def test_prepare_keeps_a_frame_per_attention_length_when_figures_are_asked():
    render.prepare(Config(lengths=(4, 8, 4), model="both"), ("png", "svg"))
    assert sorted(frames._FRAMES) == [(render.MAP_FRAME, 4), (render.MAP_FRAME, 8)]
    frames.clear()
    render.prepare(Config(lengths=(4, 8), model="plain"), ("png",))  # the plain model draws no map
    render.prepare(Config(lengths=(4, 8), model="attention"), ())  # --no-figures
    assert frames._FRAMES == {}
    assert frames.take((render.MAP_FRAME, 4)) is None
    render.prepare(Config(lengths=tuple(range(1, 21)), model="attention"), ("png",))  # the 8 longest only
    assert sorted(frames._FRAMES) == [(render.MAP_FRAME, length) for length in range(13, 21)]


def _saved_with_box(monkeypatch) -> list:
    """Record, for each map saved, whether it was cropped to its frame's box."""
    used: list = []
    save = render._save

    def spy(fig, path, digest, formats, box=None):
        used.append(box is not None)
        return save(fig, path, digest, formats, box=box)

    monkeypatch.setattr(render, "_save", spy)
    return used


@pytest.mark.parametrize("length", [4, 8, 16, 32])
def test_a_map_laid_out_around_stand_ins_is_the_map_laid_out_around_its_numbers(tmp_path, monkeypatch, length):
    """At the text's lengths the frame's layout (a stand-in digit per tick, the widest title of
    seed 0) gives the very PNG of a layout measured around the real digits and title (the
    vector files' coordinates differ by fractions of a point)."""
    m = _map(length)
    used = _saved_with_box(monkeypatch)
    laid_out_before = _drawn(tmp_path, m, "frame", ("png",))
    assert used == [True]
    monkeypatch.setattr(render, "_title_fits", lambda fig, ax, box: False)  # measured now, around the numbers
    assert _drawn(tmp_path, m, "measured", ("png",)) == laid_out_before
    assert used == [True, False]


def test_a_title_wider_than_its_stand_in_is_laid_out_again(tmp_path, monkeypatch):
    used = _saved_with_box(monkeypatch)
    wide = {**_map(3), "seed": 123456789}  # the title's last line outgrows seed 0's
    _drawn(tmp_path, wide, "wide")
    _drawn(tmp_path, _map(3), "seed0")
    assert used == [False, True]


def test_title_fits_judges_the_title_against_the_frames_box():
    import matplotlib.pyplot as plt

    fig, ax, im, box = render._map_frame(4)
    assert render._title_fits(fig, ax, box)  # the stand-in itself
    ax.set_title("a title far wider than the stand-in the layout made room for, " * 2, fontsize=9)
    assert not render._title_fits(fig, ax, box)
    ax.set_title("short", fontsize=9)
    assert render._title_fits(fig, ax, box)
    ax.set_title("one\ntwo\nthree\nfour", fontsize=9)  # taller than the stand-in's three lines
    assert not render._title_fits(fig, ax, box)
    plt.close(fig)


@pytest.mark.parametrize("length", [1, 2, 3])
def test_the_shortest_maps_keep_length_4s_size(tmp_path, length):
    """Below length 4 the figure used to shrink until the y axis's label ran into the title."""
    from PIL import Image

    sizes = {Image.open(tmp_path / name / "map.png").size
             for name in ("short", "four") if _drawn(tmp_path, _map(length if name == "short" else 4), name)}
    assert len(sizes) == 1
