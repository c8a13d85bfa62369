"""The report rendered: markdown (report.md, the results pages), one self-contained HTML page
(report.html) and CSV (report.csv), from what `sections` computed; `write` writes all three."""

from __future__ import annotations

import html
from pathlib import Path

from .. import tables
from .contents import Report, sections
from .loading import Loaded, loaded

# The page's stylesheet and its sorting script (click a header: numbers sort as numbers, by
# data-sort), package data in mlpbench/static/ inlined so that the page stays one self-contained file.
STATIC = Path(__file__).resolve().parent.parent / "static"


def anchor(title: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in title.lower()).strip("-")


def _code(name: str) -> str:
    return f"`{name}`"


def markdown(rep: Report, title: str, preface: tuple[str, ...] = (), link=_code, plots: str | None = None) -> str:
    """The report as markdown: `link(label)` spells each source file, `plots` names the HTML page
    whose sections hold the plots (left out where None)."""
    md = [f"# {title}", ""] + [line for text in (*preface, *rep.intro) for line in (text, "")]
    for name, parts in rep.sections:
        shown = [(kind, *rest) for kind, *rest in parts if kind != "plot"]
        drawn = [rest[0] for kind, *rest in parts if kind == "plot"]
        if not (plots and drawn) and not any(kind in ("table", "long") for kind, *_ in shown):
            continue
        md += [f"## {name}", ""]
        for kind, *rest in shown:
            if kind == "h3":
                md += [f"### {rest[0]}", ""]
            elif kind == "text":
                md += [rest[0], ""]
            else:
                md += [rest[0].markdown(), ""]
                if rest[0].sources:
                    md += [tables.from_line(rest[0].sources, rep.dirty, link), ""]
        if plots and drawn:
            md += [f"Plots in [{plots}]({plots}#{anchor(name)}): " + "; ".join(drawn) + ".", ""]
    return "\n".join(md).rstrip() + "\n"


def _inline(text: str) -> str:
    """Markdown `code` spans as <code>, everything else escaped."""
    parts = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if k % 2 else p for k, p in enumerate(parts))


def html_page(rep: Report) -> str:
    """The report as one self-contained HTML page: plots as data: URIs, stylesheet and script inline."""
    body = []
    for title, parts in rep.sections:
        body.append(f"<h2 id='{anchor(title)}'>{html.escape(title)}</h2>")
        for kind, *rest in parts:
            if kind == "h3":
                body.append(f"<h3>{html.escape(rest[0])}</h3>")
            elif kind == "text":
                body.append(f"<p class='text'>{_inline(rest[0])}</p>")
            elif kind == "plot":
                body.append(f"<img alt='{html.escape(rest[0])}' src='data:image/png;base64,{rest[1]}'>")
                if rest[2]:
                    body.append(f"<p class='src'>{_inline(tables.from_line(rest[2], rep.dirty))}</p>")
            else:
                table = rest[0].html()
                if kind == "long":
                    table = f"<details><summary>{len(rest[0].rows)} rows: click to open</summary>{table}</details>"
                body.append(table)
                if rest[0].sources:
                    body.append(f"<p class='src'>{_inline(tables.from_line(rest[0].sources, rep.dirty))}</p>")
    nav = "".join(f"<a href='#{anchor(t)}'>{html.escape(t)}</a>" for t, _ in rep.sections)
    lines = "".join(f"<p class='{'note' if 'noisy' in t or tables.DIRTY in t else 'intro'}'>{_inline(t)}</p>"
                    for t in rep.intro)
    return ("<!doctype html><html lang='en'><meta charset='utf-8'><title>mlpbench report</title>"
            f"<meta name='viewport' content='width=device-width'><style>{(STATIC / 'report.css').read_text()}</style>"
            f"<h1>mlpbench report</h1>{lines}<nav>{nav}</nav>" + "".join(body)
            + f"<script>{(STATIC / 'report.js').read_text()}</script></html>\n")


def write(results: Path | Loaded, output: Path) -> list[Path]:
    """Write report.md, report.html (self-contained, with the plots) and report.csv (one row per
    measurement) under `output`."""
    import matplotlib

    matplotlib.use("Agg")
    output.mkdir(parents=True, exist_ok=True)
    rep = sections(loaded(results))
    paths = [output / "report.md", output / "report.html", output / "report.csv"]
    paths[0].write_text(markdown(rep, "mlpbench report", plots=paths[1].name))
    paths[1].write_text(html_page(rep))
    paths[2].write_text(rep.measurements.csv())
    return paths
