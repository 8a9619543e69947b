"""The README a newcomer reads first: short, a picture of the texts' results near the top, and
every link it and the docs pages make resolves to a file of the repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_readme_is_short_and_shows_the_texts_results_first():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 200
    pictures = re.findall(r'<img src="([^"]+)"', "\n".join(lines[:30]))
    assert {"docs/img/heatmap_attention_translation.png", "docs/img/copy_task_accuracy.png"} <= set(pictures)
    for picture in pictures:
        assert (ROOT / picture).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", picture


def test_every_relative_link_of_the_readme_and_the_docs_resolves():
    pages = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if not re.match(r"[a-z]+://", target) and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert broken == []
