"""report.html: the audit report as one self-contained page for people who read in a browser.

The page is rendered from report.md itself, with markdown-it-py's CommonMark
parser and GitHub-flavoured tables, so that the two can never say different
things.  Figures (SVG or PNG) are embedded as base64 data URIs, so the file can be
mailed or attached to a CI run on its own.  Raw HTML in the markdown is not
passed through (a mechanism's error message could contain any text), it is
shown escaped.
"""

from __future__ import annotations

import base64
import html
import pathlib

from markdown_it import MarkdownIt

IMAGE_TYPES = {".svg": "image/svg+xml", ".png": "image/png"}
"""The figures embedded, by suffix (every command draws SVG; a PNG is embedded too)."""
STYLE = """
body { font-family: system-ui, sans-serif; max-width: 72rem; margin: 2rem auto; padding: 0 1rem;
       line-height: 1.45; color: #1b1b1b; }
table { border-collapse: collapse; margin: 0.5rem 0 1.2rem; font-size: 0.9rem; }
th, td { border: 1px solid #c8c8c8; padding: 0.25rem 0.55rem; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
tr:nth-child(even) td { background: #fafafa; }
img { max-width: 100%; border: 1px solid #e0e0e0; margin: 0.5rem 0; }
code { background: #f3f3f3; padding: 0 0.2rem; }
h2.verdict { padding: 0.35rem 0.7rem; border-left: 0.45rem solid; border-radius: 0.2rem; }
h2.verdict-pass { background: #e6f4ea; border-color: #1e7b34; color: #0f4d21; }
h2.verdict-violation { background: #fce8e6; border-color: #b3261e; color: #7a1410; }
h2.verdict-inconclusive { background: #fff4d5; border-color: #9a6700; color: #5c3d00; }
h2.verdict-error { background: #ece7f6; border-color: #5b3e96; color: #3a2566; }
"""
VERDICT_HEADING = "Verdict: "
"""The start of report.md's verdict heading (``## Verdict: **PASS**``): report.html colours it by its verdict, whose
word stays the text (the colour is never the only sign), dark on light at a contrast above 7:1."""


def markdown_parser() -> MarkdownIt:
    """CommonMark with GitHub's pipe tables, raw HTML off: how report.md is read on GitHub, minus HTML."""
    return MarkdownIt("commonmark", {"html": False}).enable("table")


def render_html(markdown: str, base_dir: pathlib.Path, title: str = "capaudit audit report") -> str:
    """A whole HTML page for ``markdown``, images under ``base_dir`` embedded as data URIs.

    Parameters
    ----------
    markdown : str
        The report's markdown.
    base_dir : Path
        The directory the markdown's relative image paths start from.
    title : str
        The page's ``<title>``.

    Returns
    -------
    str
        The page; an image whose file is missing keeps its relative path.
    """
    parser = markdown_parser()
    tokens = parser.parse(markdown)
    for heading, inline in zip(tokens, tokens[1:]):
        if heading.type == "heading_open" and inline.content.startswith(VERDICT_HEADING):
            verdict = inline.content[len(VERDICT_HEADING):].strip("* ").lower()
            heading.attrSet("class", f"verdict verdict-{verdict}")
    for token in tokens:
        for child in token.children or ():
            if child.type == "image":
                child.attrSet("src", _data_uri(base_dir, str(child.attrGet("src"))))
    body = parser.renderer.render(tokens, parser.options, {})
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{body}</body>\n</html>\n"
    )


def write_html_report(report_md: pathlib.Path) -> pathlib.Path:
    """Write report.html beside ``report_md`` (same name, ``.html``) and return its path."""
    report_md = pathlib.Path(report_md)
    path = report_md.with_suffix(".html")
    path.write_text(render_html(report_md.read_text(), report_md.parent), encoding="utf-8")
    return path


def _data_uri(base_dir: pathlib.Path, src: str) -> str:
    """``data:image/svg+xml;base64,...`` (or ``image/png``) for a figure under ``base_dir``; other sources as they are."""
    path = base_dir / src
    media = IMAGE_TYPES.get(path.suffix.lower())
    if media is None or not path.is_file():
        return src
    return f"data:{media};base64," + base64.b64encode(path.read_bytes()).decode("ascii")
