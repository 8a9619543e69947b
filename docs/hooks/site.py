"""The docs site's build-time pages (an mkdocs hook, named in mkdocs.yml).

- ``commands/<name>.md``: one page per ``attn`` command, its help rendered by mkdocs-click
  from the click command itself;
- the gallery: every PNG that ``attn all --quick`` draws, with the command that draws it, and
  a headless-Chromium screenshot of that run's report (``index.html``);
- ``contributing.md``, copied from ``CONTRIBUTING.md``, and the repository files the pages
  link to (``../examples/...``).

``ATTN_DOCS_RUN=DIR``: take the ``attn all --quick`` output in DIR (made there first when DIR
holds no manifest.json) instead of a run in a temporary folder.  Without Chromium the build
fails, unless ``ATTN_DOCS_NO_BROWSER=1`` (then the gallery says the screenshot is missing).
"""

from __future__ import annotations

import copy
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]
COPIED = {"contributing.md": "CONTRIBUTING.md"}
OUT_OF_DOCS = re.compile(r"\]\(\.\./([^)#\s]+)")  # a link from docs/ to a file of the repository
GALLERY = "gallery.md"
HELP_MODULE = "attn_docs_help"  # the commands as mkdocs-click reads them (made in on_config)
_appended: dict[str, str] = {}  # page -> Markdown added at its end
SPHINX_ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj):<code>")


def on_config(config):
    """The nav's Commands entry gets one page per command; the commands are made readable by
    mkdocs-click (:data:`HELP_MODULE`)."""
    commands = _commands()
    module = types.ModuleType(HELP_MODULE, "Each attn command with its help as Markdown, for mkdocs-click.")
    for name, command in commands.items():
        shown = copy.copy(command)
        shown.help = _markdown_help(command)
        setattr(module, name.replace("-", "_"), shown)
    sys.modules[HELP_MODULE] = module
    pages = ["commands/index.md", *({f"attn {name}": f"commands/{name}.md"} for name in sorted(commands))]
    config.nav = [{"Commands": pages} if item == {"Commands": "commands/index.md"} else item for item in config.nav]
    return config


def on_files(files, config):
    for name, command in _commands().items():
        files.append(File.generated(config, f"commands/{name}.md", content=_command_page(name, command)))
    for page, source in COPIED.items():
        files.append(File.generated(config, page, content=(ROOT / source).read_text().replace("](docs/", "](")))
    for page in Path(config.docs_dir).glob("*.md"):
        for target in OUT_OF_DOCS.findall(page.read_text()):
            if (ROOT / target).is_file() and files.get_file_from_path(target) is None:
                files.append(File.generated(config, target, abs_src_path=str(ROOT / target)))
    _appended["commands/index.md"] = _command_table()
    _appended[GALLERY] = _gallery(files, config)
    return files


def on_page_markdown(markdown, page, config, files):
    if "/" not in page.file.src_uri:  # links out of docs/ point at the copies made in on_files
        markdown = OUT_OF_DOCS.sub(lambda m: f"]({m[1]}" if (ROOT / m[1]).is_file() else m[0], markdown)
    return markdown + _appended.get(page.file.src_uri, "")


def on_page_content(html, page, config, files):
    """Docstrings name things with Sphinx roles (``:class:`X```): the page shows the name alone."""
    return SPHINX_ROLE.sub("<code>", html)


# --------------------------------------------------------------------------- commands


def _commands() -> dict:
    from attn_cli.cli import all_commands

    return {name: command for name, command in all_commands().items() if not command.hidden}


def _command_page(name: str, command) -> str:
    return (
        f"::: mkdocs-click\n    :module: {HELP_MODULE}\n    :command: {name.replace('-', '_')}\n"
        f"    :prog_name: attn {name}\n    :depth: 0\n"
    )


def _markdown_help(command) -> str:
    """The help text as ``--help`` shows it, in Markdown: mkdocs-click passes it through as
    Markdown, so a ``\\b`` paragraph (printed as written: the examples) becomes a code block and
    ``<`` is escaped; then the rule its values are judged by, which ``JudgedCommand`` adds."""
    from attn_cli.cli.options import JudgedCommand
    from attn_cli.published.compare import judged_by

    paragraphs = inspect.cleandoc(command.help or "").split("\n\n")
    if isinstance(command, JudgedCommand) and judged_by(command.name):
        paragraphs.append(judged_by(command.name))
    return "\n\n".join(f"```text\n{p[2:]}\n```" if p.startswith("\b\n") else p.replace("<", "&lt;") for p in paragraphs)


def _command_table() -> str:
    rows = [
        f"| [`attn {name}`]({name}.md) | {command.get_short_help_str(limit=300).replace('|', '&#124;')} |"
        for name, command in sorted(_commands().items())
    ]
    return "\n| command | what it does |\n| --- | --- |\n" + "\n".join(rows) + "\n"


# --------------------------------------------------------------------------- gallery


def _gallery(files, config) -> str:
    """Adds each figure of an ``attn all --quick`` run and the report's screenshot under gallery/;
    returns the gallery page's Markdown."""
    given = os.environ.get("ATTN_DOCS_RUN")
    out = Path(given) if given else Path(tempfile.mkdtemp(prefix="attn-docs-"))
    try:
        if not (out / "manifest.json").exists():
            proc = subprocess.run(
                [sys.executable, "-m", "attn_cli", "all", "--quick", "--out", str(out)], capture_output=True, text=True
            )
            if proc.returncode != 0:
                raise PluginError(f"attn all --quick failed (exit {proc.returncode}):\n{proc.stderr}")
        manifest = json.loads((out / "manifest.json").read_text())
        pngs = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.png"))
        for png in pngs:
            files.append(File.generated(config, f"gallery/{png}", content=(out / png).read_bytes()))
        shot = _screenshot(out / "index.html")
        if shot is not None:
            files.append(File.generated(config, "gallery/report.png", content=shot))
    finally:
        if not given:
            shutil.rmtree(out, ignore_errors=True)
    return _gallery_markdown(manifest, pngs, shot is not None)


def _gallery_markdown(manifest: dict, pngs: list[str], with_screenshot: bool) -> str:
    from attn_cli.published.catalogue import ARTIFACTS

    titles = {a.id: f"{a.source} {a.section}: {a.title}" for a in ARTIFACTS}
    lines, shown = [], set()
    for artifact, entry in manifest["artifacts"].items():
        figures = [f for f in entry["files"] if f in pngs and f not in shown]
        if not figures:
            continue
        shown.update(figures)
        command = entry["command"]
        lines += [
            f"\n## {titles.get(artifact, artifact)}\n",
            f"Drawn by [`attn {command}`](commands/{command}.md); this figure alone: `attn all --only {artifact}`.\n",
        ]
        lines += [f"![{figure}](gallery/{figure})\n" for figure in figures]
    others = [f for f in pngs if f not in shown]
    if others:
        lines += ["\n## Other figures\n", "Drawn by [`attn all`](commands/all.md).\n"]
        lines += [f"![{figure}](gallery/{figure})\n" for figure in others]
    lines.append("\n## The report\n")
    if with_screenshot:
        lines.append(
            "`index.html` of the same run in headless Chromium (1280 x 900), taken as this "
            "site was built.\n\n![the report of attn all --quick](gallery/report.png)\n"
        )
    else:
        lines.append("No screenshot: this site was built without Chromium (ATTN_DOCS_NO_BROWSER=1).\n")
    return "\n".join(lines)


def _screenshot(page: Path) -> bytes | None:
    """The page in headless Chromium, as PNG bytes; None without Chromium if ATTN_DOCS_NO_BROWSER=1."""
    browser = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
    if browser is None:
        if os.environ.get("ATTN_DOCS_NO_BROWSER"):
            return None
        raise PluginError(
            "no Chromium for the report's screenshot: install it (apt-get install chromium) "
            "or set ATTN_DOCS_NO_BROWSER=1 to build without it"
        )
    with tempfile.TemporaryDirectory(prefix="attn-docs-shot-") as tmp:
        shot = Path(tmp) / "report.png"
        proc = subprocess.run(
            [
                browser,
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--no-first-run",
                f"--user-data-dir={tmp}/profile",
                "--window-size=1280,900",
                f"--screenshot={shot}",
                page.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if proc.returncode != 0 or not shot.exists():
            raise PluginError(f"Chromium made no screenshot of {page} (exit {proc.returncode}):\n{proc.stderr}")
        return shot.read_bytes()
