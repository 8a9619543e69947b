"""Tables as plain data (values as short text), and the one place they become rich, Markdown, HTML or CSV.

A renderer's ``tables()`` returns blocks: a :class:`Table` or a paragraph (``str`` or :class:`Text`).
Cell text is data, never markup; colour comes from spans styled with one of :data:`STYLES`.
"""

from __future__ import annotations

import csv
import html
import io
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import JustifyMethod, OverflowMethod
    from rich.table import Table as RichTable
    from rich.text import Text as RichText

# style -> HTML class; the keys are rich styles, the only ones a span may carry
STYLES = {
    "green": "pass",
    "bold green": "pass",
    "red": "fail",
    "bold red": "fail",
    "yellow": "skip",
    "dim": "dim",
    "bold": "strong",
    "": "",
}


@dataclass(frozen=True)
class Text:
    """Text in styled spans: ``spans`` of (text, style); ``verdict`` pass/fail/skip where the
    text is one (the HTML marks the cell)."""

    spans: tuple[tuple[str, str], ...]
    verdict: str = ""

    def __post_init__(self) -> None:
        for _, style in self.spans:
            if style not in STYLES:
                raise ValueError(f"unknown style {style!r}")
        if self.verdict not in ("", "pass", "fail", "skip"):
            raise ValueError(f"unknown verdict {self.verdict!r}")


Cell = str | Text


def styled(*parts: str | tuple[str, str], verdict: str = "") -> Text:
    """``styled("0.95 ", ("=", "green"), " ", ("0.94", "dim"), verdict="pass")``."""
    return Text(tuple((p, "") if isinstance(p, str) else p for p in parts), verdict)


def plain(cell: Cell) -> str:
    return "".join(text for text, _ in cell.spans) if isinstance(cell, Text) else str(cell)


@dataclass(frozen=True)
class Column:
    header: str
    justify: JustifyMethod = "left"  # left | right | center
    no_wrap: bool = False
    style: str = ""
    ratio: int | None = None
    overflow: OverflowMethod = "ellipsis"


@dataclass
class Table:
    """Title, columns, rows of cells and a caption; ``terminal`` holds rich-only layout
    (``box``, ``padding``, ``show_lines``)."""

    title: str = ""
    caption: Cell = ""
    columns: list[Column] = field(default_factory=list)
    rows: list[tuple[Cell, ...]] = field(default_factory=list)
    section_ends: set[int] = field(default_factory=set)
    terminal: dict[str, Any] = field(default_factory=dict)

    def add_column(self, header: str, **options: Any) -> None:
        self.columns.append(Column(header, **options))

    def add_row(self, *cells: Cell, end_section: bool = False) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"{len(cells)} cells for {len(self.columns)} columns in {self.title!r}")
        self.rows.append(tuple(cells))
        if end_section:
            self.section_ends.add(len(self.rows) - 1)


Block = Table | Text | str


def titled_table(
    heading: str,
    columns: Sequence[str] = (),
    rows: Iterable[Sequence[Cell]] = (),
    left: Sequence[str] = (),
    caption: str | None = None,
    subtitle: str = "",
) -> Table:
    """``heading  (subtitle)``: ``columns`` right-justified except those in ``left``, then ``rows``."""
    title = heading + (f"  ({subtitle})" if subtitle else "")
    t = Table(title=title, caption=caption or "")
    for col in columns:
        t.add_column(col, justify="left" if col in left else "right")
    for row in rows:
        t.add_row(*row)
    return t


def _rich_text(cell: Cell) -> RichText:
    from rich.text import Text as RichText

    return RichText.assemble(*cell.spans) if isinstance(cell, Text) else RichText(str(cell))


def to_rich(block: Block) -> RichTable | RichText:
    """A rich renderable of one block (for the terminal and the notebook's plain text)."""
    from rich import box
    from rich.table import Table as RichTable
    from rich.text import Text as RichText

    if not isinstance(block, Table):
        return _rich_text(block)
    layout = dict(block.terminal)
    if "box" in layout:
        layout["box"] = getattr(box, layout["box"])
    table = RichTable(
        title=RichText(block.title) if block.title else None,
        caption=_rich_text(block.caption) if plain(block.caption) else None,
        title_justify="left",
        caption_justify="left",
        **layout,
    )
    for c in block.columns:
        options = asdict(c) | {"style": c.style or None}
        table.add_column(RichText(options.pop("header")), **options)
    for i, row in enumerate(block.rows):
        table.add_row(*(_rich_text(c) for c in row), end_section=i in block.section_ends)
    return table


def to_text(blocks: Iterable[Block], width: int = 100) -> str:
    """The blocks as the terminal shows them, without colour."""
    from rich.console import Console

    console = Console(file=io.StringIO(), width=width, record=True, color_system=None, soft_wrap=False)
    for b in blocks:
        console.print(to_rich(b))
    return console.export_text()


# Markdown that stays text in any viewer: no raw HTML (< > & as entities), no code span
# (backtick), no escape swallowed (backslash); in a table cell also no cell break (pipe)
_MD_ESCAPES = str.maketrans({"\\": "\\\\", "`": "\\`", "<": "&lt;", ">": "&gt;", "&": "&amp;"})


def md_escape(text: Any, cell: bool = True) -> str:
    """``text`` as literal Markdown; ``cell``: for a table cell (a pipe escaped, a line break
    as ``<br>``), otherwise for a paragraph or a title (lines kept)."""
    text = str(text).translate(_MD_ESCAPES).replace("\r\n", "\n").replace("\r", "\n")
    return text.replace("|", "\\|").replace("\n", "<br>") if cell else text


def _caption_lines(table: Table) -> list[str]:
    return [line.strip() for line in plain(table.caption).splitlines() if line.strip()]


def _markdown(block: Block) -> str:
    """A paragraph, or a pipe table with its title in bold above and its caption in italics below."""
    if not isinstance(block, Table):
        return md_escape(plain(block).strip(), cell=False)
    lines = [f"**{md_escape(block.title, cell=False)}**", ""] if block.title else []
    align = {"right": "---:", "center": ":---:"}
    lines.append("| " + " | ".join(md_escape(c.header) or " " for c in block.columns) + " |")
    lines.append("| " + " | ".join(align.get(c.justify, "---") for c in block.columns) + " |")
    lines += ["| " + " | ".join(md_escape(plain(c)) for c in row) + " |" for row in block.rows]
    if caption := _caption_lines(block):
        lines += [""] + [f"*{md_escape(line, cell=False)}*" for line in caption]
    return "\n".join(lines)


def to_markdown(blocks: Sequence[Block]) -> str:
    """Blocks as Markdown, separated by blank lines (an empty paragraph left out)."""
    return "\n\n".join(b for b in map(_markdown, blocks) if b)


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _html_spans(cell: Cell) -> str:
    spans = cell.spans if isinstance(cell, Text) else ((str(cell), ""),)
    return "".join(f'<span class="{STYLES[s]}">{esc(text)}</span>' if STYLES[s] else esc(text) for text, s in spans)


def _html(block: Block) -> str:
    """A paragraph, or a table: its title as the caption, its caption in a note below (all escaped)."""
    if not isinstance(block, Table):
        return f'<p class="note">{_html_spans(block)}</p>'.replace("\n", "<br>")
    rows = []
    for row in block.rows:
        cells = []
        for cell, column in zip(row, block.columns):
            verdict = cell.verdict if isinstance(cell, Text) else ""
            classes = " ".join(c for c in (verdict, "num" if column.justify == "right" else "") if c)
            attr = f' class="{classes}"' if classes else ""
            cells.append(f"<td{attr}>{_html_spans(cell)}</td>".replace("\n", "<br>"))
        rows.append("<tr>" + "".join(cells) + "</tr>")
    head = "".join(f"<th>{esc(c.header)}</th>" for c in block.columns)
    title = f"<caption>{esc(block.title)}</caption>" if block.title else ""
    caption = "<br>".join(esc(line) for line in _caption_lines(block))
    return (
        f'<div class="scroll"><table>{title}<thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'
        + (f'<p class="note">{caption}</p>' if caption else "")
    )


def to_html(blocks: Sequence[Block]) -> str:
    """Blocks as HTML, a table or a paragraph each (an empty paragraph left out)."""
    return "\n".join(_html(b) for b in blocks if isinstance(b, Table) or plain(b).strip())


def to_csv(table: Table) -> str:
    """The table's header and rows as CSV text (plain cells)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([c.header for c in table.columns])
    writer.writerows([plain(c) for c in row] for row in table.rows)
    return buf.getvalue()
