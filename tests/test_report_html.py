"""index.html: the writer on its own, then the real page of `attn all --quick` in headless Chromium.

The browser tests need Debian's ``chromium`` (``.ci/run`` installs it with apt-get and sets
ATTN_REQUIRE_BROWSER=1, so there a missing browser fails instead of skipping).
"""

from __future__ import annotations

import json
import os

import pytest
from cdp import assert_not_blank
from conftest import run_attn

from attn_cli.published.compare import Outcome
from attn_cli.published.types import Artifact, Check
from attn_cli.records import Section
from attn_cli.render import html
from attn_cli.render.report import figure_markdown, figure_views

# --------------------------------------------------------------------------- the writer


def _outcome(cid, artifact, status, kind="measured", note=""):
    test = "rule" if kind == "rule" else "abs"
    check = Check(
        id=cid, artifact=artifact, published=1.0, test=test, kind=kind, tolerance=0.1 if test == "abs" else None
    )
    return Outcome(check, 1.0 if status == "pass" else 2.0, status, note)


def _page(outcomes, *, title="t", quick=False, sections=()):
    catalogue = [
        Artifact("a-one", "W9", "1.1", "first <b>thing</b>", "one", ("one.png",)),
        Artifact("a-two", "D2L", "10.3", "second", "two"),
    ]
    manifest = {
        "command": "attn all",
        "quick": quick,
        "seed": 0,
        "device": "cpu",
        "seconds": 1.25,
        "versions": {"attn": "0", "torch": "9"},
        "machine": {"cpu": "Some CPU", "cores": "2 logical cores"},
        "artifacts": {"a-one": {"files": ["one.md", "one.json", "one.png", "one.svg", "one.pdf", "one.csv"]}},
        "numerics": {"mode": "portable", "isa": "AVX2"},
    }
    return html.index_html(
        catalogue=catalogue,
        sections=list(sections),
        manifest=manifest,
        outcomes=outcomes,
        summary="2 checked, 1 passed, 1 failed",
        coverage_line="coverage: 2/2",
        title=title,
    )


def test_kinds_are_counted_apart():
    outcomes = [
        _outcome("a-one.x", "a-one", "pass"),
        _outcome("a-one.y", "a-one", "fail"),
        _outcome("a-two.r", "a-two", "pass", kind="rule"),
        _outcome("a-two.i", "a-two", "skipped", "identity"),
    ]
    counts = html.kind_counts(outcomes)
    assert list(counts) == ["measured", "rule", "identity"]
    assert counts["measured"] == {"pass": 1, "fail": 1, "skipped": 0}
    assert counts["rule"]["pass"] == 1 and counts["identity"]["skipped"] == 1
    assert html.kind_counts([_outcome("a-one.z", "a-one", "n/a")])["measured"]["fail"] == 1  # not the text's


def test_page_escapes_everything_lists_failures_first_and_shows_the_numeric_mode():
    outcomes = [_outcome("a-one.x", "a-one", "pass"), _outcome("a-two.<y>", "a-two", "fail", note="off by <1>")]
    page = _page(outcomes, title="<script>alert(1)</script>")
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "first &lt;b&gt;thing&lt;/b&gt;" in page and "a-two.&lt;y&gt;" in page
    assert page.index("1 failed") < page.index('id="id-a-one"')  # the failure is in the summary
    assert 'href="#id-a-two"' in page and "off by &lt;1&gt;" in page
    assert "portable (AVX2 CPU kernels)" in page and "Some CPU" in page and "1.2 s" in page
    assert "http://" not in page and "https://" not in page and "<script" not in page
    assert "@media print" in page and "@media (max-width" in page


def test_a_check_that_does_not_apply_renders_as_a_failure():
    """n/a (settings not the text's) fails verify, as in the Markdown, the terminal and JUnit."""
    page = _page([_outcome("a-one.z", "a-one", "n/a", note="n/a: settings differ from the text's")])
    assert '<tr class="fail"><td class="id">a-one.z</td>' in page
    assert '<td class="verdict fail">n/a: settings differ from the text&#x27;s</td>' in page
    assert "1 failed" in page


def test_sections_show_svg_before_png_link_pdf_and_data():
    section = Section(
        name="one",
        ids=["a-one"],
        seconds=0.5,
        error=None,
        tables=["a note"],
        figures=["one.png", "one.svg", "one.pdf"],
        data=["one.md", "one.json", "one.csv"],
    )
    page = _page([], sections=[section])
    assert '<img src="one.svg"' in page and '<img src="one.png"' not in page
    assert 'href="one.pdf"' in page and 'href="one.png"' in page and 'href="one.csv"' in page
    assert "a note" in page


def test_figure_views_pick_one_format_per_figure():
    assert figure_views(["m.png", "m.svg", "m.pdf", "n.pdf"], ("svg", "png")) == [
        ("m.svg", ["m.png", "m.pdf"]),
        (None, ["n.pdf"]),
    ]
    assert figure_markdown(["m.svg", "m.png"]) == ["![m.png](m.png)\n\nAlso: [m.svg](m.svg)."]


# --------------------------------------------------------------------------- the real page in a browser


@pytest.fixture(scope="module")
def report(quick_report):
    """The session's real `attn all --quick --format svg png` (conftest.quick_report)."""
    return quick_report


def test_a_blank_or_one_colour_screenshot_is_refused():
    import io

    import numpy as np
    from matplotlib import image

    def png(pixels) -> bytes:
        buffer = io.BytesIO()
        image.imsave(buffer, pixels, format="png")
        return buffer.getvalue()

    for flat in (np.ones((40, 40, 3)), np.full((40, 40, 3), 0.5)):
        with pytest.raises(AssertionError):
            assert_not_blank(png(flat))
    speck = np.ones((40, 40, 3))
    speck[20, 20] = 0  # one dark pixel: contrast, but almost one colour
    with pytest.raises(AssertionError, match="almost one colour"):
        assert_not_blank(png(speck))
    half = np.ones((40, 40, 3))
    half[:, :20] = 0
    assert_not_blank(png(half))


def test_the_report_loads_offline_with_every_figure_and_id(browser, report, tmp_path):
    from attn_cli.published.catalogue import ARTIFACTS

    browser.load((report / "index.html").as_uri())
    images = json.loads(
        browser.evaluate(
            "JSON.stringify([...document.images].map(i => [i.getAttribute('src'), i.complete, i.naturalWidth]))"
        )
    )
    figures = {f.rsplit(".", 1)[0] for f in os.listdir(report) if f.endswith(".svg")}
    assert len(images) == len(figures) >= 15
    assert all(src.endswith(".svg") for src, _, _ in images)  # SVG where written
    assert [src for src, complete, width in images if not complete or width <= 0] == []
    requests = browser.requests()
    assert len(requests) > len(images)  # the page and its images were seen
    folder = report.resolve().as_uri() + "/"
    assert [u for u in requests if not u.startswith(folder) and not u.startswith("data:")] == []
    assert browser.errors() == []
    text = browser.evaluate("document.body.innerText")
    for a in ARTIFACTS:
        assert browser.evaluate(f"!!document.getElementById({json.dumps(html.anchor(a.id))})"), a.id
        assert a.id in text
    shot = browser.screenshot()
    assert_not_blank(shot)
    (tmp_path / "screenshot.png").write_bytes(shot)  # kept for a look; the report folder is shared


def test_the_report_fits_a_phone_and_prints_without_navigation(browser, report):
    browser.load((report / "index.html").as_uri(), width=390, height=800)
    assert browser.evaluate("document.documentElement.scrollWidth") <= 390
    browser.send("Emulation.setEmulatedMedia", {"media": "print"}, session=True)
    try:
        assert browser.evaluate("getComputedStyle(document.querySelector('nav')).display") == "none"
    finally:
        browser.send("Emulation.setEmulatedMedia", {"media": ""}, session=True)


def test_the_checks_catch_a_page_that_reaches_out(browser, tmp_path):
    """The same assertions fail on a page that loads from the network and logs an error."""
    page = tmp_path / "bad.html"
    page.write_text(
        '<!DOCTYPE html><img src="http://127.0.0.1:9/x.png"><img src="missing.png">'
        "<script>console.error('boom')</script>"
    )
    browser.load(page.as_uri())
    folder = tmp_path.resolve().as_uri() + "/"
    assert [u for u in browser.requests() if not u.startswith(folder)] == ["http://127.0.0.1:9/x.png"]
    errors = browser.errors()
    assert any("boom" in e for e in errors) and any("failed load" in e for e in errors)
    widths = json.loads(browser.evaluate("JSON.stringify([...document.images].map(i => i.naturalWidth))"))
    assert widths == [0, 0]


def test_verify_out_writes_its_page(tmp_path):
    proc = run_attn("verify", "--only", "w9-worked", "--out", tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "verify.html").read_text()
    records = json.loads((tmp_path / "verify.json").read_text())["checks"]
    assert records and all(r["artifact"] == "w9-worked" for r in records)
    assert 'id="id-w9-worked"' in page and "w9-worked" in page and 'href="verify.json"' in page
    assert not (tmp_path / "index.html").exists()  # an `attn all` report there is left alone


def test_the_verify_page_draws_each_margin_as_a_bar(browser, tmp_path):
    """A judged check's margin is a bar beside its verdict, as wide as the margin; an identity has none."""
    proc = run_attn("verify", "--only", "w9-masks", "w9-ppmi", "--out", tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    checks = json.loads((tmp_path / "verify.json").read_text())["checks"]
    browser.load((tmp_path / "verify.html").as_uri())
    bars = json.loads(
        browser.evaluate(
            "JSON.stringify([...document.querySelectorAll('.bar')].map(b => [b.title, "
            "b.firstElementChild.getBoundingClientRect().width / b.getBoundingClientRect().width]))"
        )
    )
    margins = [c["margin"] for c in checks if "margin" in c]
    assert len(bars) == len(margins) == sum(c["kind"] != "identity" for c in checks) > 5
    assert sorted(title for title, _ in bars) == sorted(f"margin {m:.3f}" for m in margins)  # the page's order
    for title, fraction in bars:
        margin = float(title.split()[1])
        assert fraction == pytest.approx(max(0, min(1, margin)), abs=0.05), title
    shot = browser.screenshot()
    assert_not_blank(shot)
    (tmp_path / "verify.png").write_bytes(shot)
