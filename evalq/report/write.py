"""Writing the report files; each is written to a temp name and renamed, never half-written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalq.fileio import write_text_atomic
from evalq.report.html import render_html
from evalq.report.json_text import finite, indented_pieces
from evalq.report.markdown import render_markdown


def json_pieces(report: dict[str, Any]):
    """report.json as pieces of text: written as they come, never held whole (bench/ report)."""
    yield from indented_pieces(report, indent=2)
    yield "\n"


def _write_json(path: Path, report: dict[str, Any]) -> None:
    """report.json, strict. A number that is no number (a NaN kept by a row written before
    evalq checked an agent's counts) is unavailable: written null, in a second pass taken
    only then, so the usual report is encoded once."""
    try:
        write_text_atomic(path, json_pieces(report))
    except ValueError:
        write_text_atomic(path, json_pieces(finite(report)))


RENDERERS = {
    "json": lambda report: "".join(json_pieces(report)),
    "md": render_markdown,
    "html": render_html,
}
FORMATS = tuple(RENDERERS)


def write_reports(report: dict[str, Any], out_dir: Path,
                  formats: tuple[str, ...] = ("json", "md", "html"),
                  links: dict[str, str] | None = None) -> dict[str, Path]:
    """`links`: trial id → transcript page relative to out_dir, linked from the Markdown and
    HTML reports' run tables."""
    paths = {}
    for fmt in formats:
        path = out_dir / f"report.{fmt}"
        write_one(report, fmt, path, links, "report.json" if "json" in formats else None)
        paths[fmt] = path
    return paths


def write_one(report: dict[str, Any], fmt: str, path: Path,
              links: dict[str, str] | None = None, full_rows: str | None = None) -> None:
    """One format written to `path` (report.json strict, as _write_json writes it)."""
    if fmt == "json":
        _write_json(path, report)
    else:
        write_text_atomic(path, render(report, fmt, links, full_rows))


def render(report: dict[str, Any], fmt: str, links: dict[str, str] | None = None,
           full_rows: str | None = None):
    """One format's text (report.json as pieces); `full_rows`: the link to report.json from
    the Markdown, when it is written beside it."""
    if fmt == "html":
        return render_html(report, links)
    if fmt == "md":
        return render_markdown(report, links, full_rows)
    return json_pieces(report) if fmt == "json" else RENDERERS[fmt](report)
