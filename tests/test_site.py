"""The docs site (mkdocs.yml, docs/hooks/site.py): ``mkdocs build --strict`` passes, the gallery
shows every PNG ``attn all --quick`` writes, and the built pages load in headless Chromium.

The site is built once per session (one build shared by the xdist workers, under a file lock)
from the session's ``attn all --quick`` (ATTN_DOCS_RUN), which the gallery test reads.  Needs
the docs extra (``pip install -e '.[test,docs]'``, as ``.ci/run`` does).
"""

from __future__ import annotations

import fcntl
import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cdp import assert_not_blank, find_chromium
from conftest import session_folder

ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip("mkdocs_click", reason="the docs extra is not installed: pip install -e '.[docs]'")


@pytest.fixture(scope="session")
def site(tmp_path_factory, quick_report) -> Path:
    """The folder holding ``site/`` and ``build.json`` (the build's exit status and output), built
    from the session's ``attn all --quick`` (conftest.quick_report); the first worker here builds,
    the others wait."""
    folder = session_folder(tmp_path_factory, "docs-site")
    with open(f"{folder}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (folder / "build.json").exists():
            folder.mkdir(exist_ok=True)
            env = dict(os.environ, ATTN_DOCS_RUN=str(quick_report), NO_MKDOCS_2_WARNING="1")
            if find_chromium() is None and not os.environ.get("ATTN_REQUIRE_BROWSER"):
                env["ATTN_DOCS_NO_BROWSER"] = "1"  # as the browser test skips: no screenshot
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "mkdocs",
                    "build",
                    "--strict",
                    "-f",
                    str(ROOT / "mkdocs.yml"),
                    "-d",
                    str(folder / "site"),
                ],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=600,
            )
            screenshot = "ATTN_DOCS_NO_BROWSER" not in env
            build = {"returncode": proc.returncode, "output": proc.stderr, "screenshot": screenshot}
            (folder / "build.json").write_text(json.dumps(build))
    return folder


def _built(site: Path) -> Path:
    build = json.loads((site / "build.json").read_text())
    assert build["returncode"] == 0, build["output"]
    return site / "site"


def test_the_site_builds_strict_with_a_page_per_command_and_the_api(site):
    from attn_cli.cli import all_commands

    built = _built(site)
    build = json.loads((site / "build.json").read_text())
    assert "WARNING" not in build["output"], build["output"]
    for name, command in all_commands().items():
        page = html.unescape((built / "commands" / name / "index.html").read_text())
        assert f"attn {name}" in page
        shown = [param for param in command.params if not getattr(param, "hidden", False)]
        options = [opt for param in shown for opt in param.opts if opt.startswith("--")]
        assert [opt for opt in options if opt not in page] == [], name  # the page is its --help
    api = (built / "api" / "index.html").read_text()
    assert 'id="attn_cli.api.run"' in api and 'id="attn_cli.api_catalogue.verify"' in api  # mkdocstrings
    assert '&gt;&gt;&gt; run = attn_cli.run("heads"' in api  # the doctested examples, as written
    assert "Benchmark results" in (built / "performance" / "index.html").read_text()
    for page in ("index", "security", "checking", "numerics", "cluster", "ci", "usage", "exercises", "design"):
        assert (built / page / "index.html" if page != "index" else built / "index.html").exists(), page


def _gallery_images(built: Path) -> list[Path]:
    page = built / "gallery" / "index.html"
    sources = re.findall(r'<img[^>]* src="([^"]+)"', page.read_text())
    return [(page.parent / html.unescape(src)).resolve() for src in sources]


def test_the_gallery_shows_every_figure_attn_all_quick_draws(site, quick_report):
    built = _built(site)
    run = quick_report
    drawn = sorted(p.relative_to(run).as_posix() for p in run.rglob("*.png"))
    assert len(drawn) >= 15
    images = _gallery_images(built)
    shown = sorted(p.relative_to(built / "gallery").as_posix() for p in images if p.name != "report.png")
    assert shown == drawn
    for figure in drawn:
        assert (built / "gallery" / figure).read_bytes() == (run / figure).read_bytes(), figure
    page = (built / "gallery" / "index.html").read_text()
    for command in set(re.findall(r'href="\.\./commands/([^/"]+)/"', page)):
        assert (built / "commands" / command / "index.html").exists(), command
    assert 'href="../commands/copy-task/"' in page and 'href="../commands/exercise/"' in page
    if json.loads((site / "build.json").read_text())["screenshot"]:  # the report, taken at build time
        assert "report.png" in [p.name for p in images]
        assert_not_blank((built / "gallery" / "report.png").read_bytes())
    else:
        assert "No screenshot" in page


def test_the_gallery_and_a_command_page_in_a_browser(site, browser, tmp_path):
    built = _built(site)
    browser.load((built / "gallery" / "index.html").as_uri(), width=1280, height=900)
    assert browser.evaluate("document.title").startswith("Gallery")
    images = json.loads(
        browser.evaluate(
            "Promise.all([...document.images].map(i => i.decode().catch(() => 0)))"
            ".then(() => JSON.stringify([...document.querySelectorAll('article img')].map(i => i.naturalWidth)))"
        )
    )
    assert len(images) == len(_gallery_images(built)) and min(images) > 0
    shot = browser.screenshot()
    assert_not_blank(shot)
    (tmp_path / "gallery.png").write_bytes(shot)
    folder = built.resolve().as_uri() + "/"
    assert [u for u in browser.requests() if not u.startswith((folder, "data:"))] == []  # nothing from the network
    assert browser.errors() == []

    browser.load((built / "commands" / "copy-task" / "index.html").as_uri(), width=1280, height=900)
    assert browser.evaluate("document.title").startswith("attn copy-task")
    text = browser.evaluate("document.querySelector('article').innerText")
    assert "Usage:" in text and "attn copy-task [OPTIONS]" in text and "--lengths" in text
    assert "Judged (as attn verify checks" in text  # the end of --help, which mkdocs-click alone leaves out
    assert browser.evaluate("document.querySelectorAll('article pre').length") >= 3  # examples, usage, options
    shot = browser.screenshot()
    assert_not_blank(shot)
    (tmp_path / "command.png").write_bytes(shot)
