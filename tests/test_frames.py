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


def _drawn(tmp_path, m: dict, name: str) -> list[bytes]:
    """The map's files in every format, their bytes."""
    path = tmp_path / name / "map.png"
    path.parent.mkdir()
    written = render._map_figure(m, path, "digest", FORMATS)
    assert written == [path.with_suffix("." + f) for f in FORMATS]
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
