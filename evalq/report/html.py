"""Single-file HTML report: the Markdown report's content as HTML plus three inline SVG charts.

No scripts and no external resources (a Content-Security-Policy forbids loading any), so the
file opens anywhere, offline, and shows exactly what the JSON says.
"""

from __future__ import annotations

import re
from html import escape
from typing import Any

from evalq.analysis.condition_metrics import LABELS
from evalq.report.charts import forest_plot, outcomes_chart, pass_rate_grid
from evalq.report.markdown import RUNS_SHOWN, render_markdown, run_table
from evalq.report.mdtext import inert

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
# Words and numbers never break inside (no overflow-wrap:anywhere, which split "incorrect"
# into "incorre ct"); long names still wrap at their own hyphens, and a table too wide for the
# page scrolls inside its wrapper instead of being cut off. Charts scale down, never clip.
STYLE = """
body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
.table{overflow-x:auto;margin:.5em 0 1em}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:left;font-size:13px;
overflow-wrap:normal;word-break:normal;hyphens:manual}th{background:#f3f3f3}code{background:#f3f3f3}
.chart{display:block;margin:.5em 0 1.5em;max-width:100%;height:auto}
"""


_BOLD = re.compile(r"\*\*(.+?)\*\*")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")
#: a link the report itself makes: a file beside it (no scheme, no absolute path)
_RELATIVE = re.compile(r"(?![/\\])[\w./#%-]+")


def _text(text: str) -> str:
    """Evalq's own Markdown outside code spans: **bold**, and links to files beside the
    report. Agent text never reaches here as markup (evalq.report.mdtext puts anything but
    plain words in a code span)."""
    html = _BOLD.sub(r"<strong>\1</strong>", escape(text))

    def link(m: re.Match) -> str:
        href = m.group(2)
        return (f'<a href="{href}">{m.group(1)}</a>' if _RELATIVE.fullmatch(href)
                else m.group(0))

    return _LINK.sub(link, html)


def _inline(text: str) -> str:
    """One line of the report's Markdown as HTML: code spans (any fence length, as
    CommonMark reads them) shown literally, the rest through _text."""
    out, i, start = [], 0, 0
    while i < len(text):
        if text[i] != "`":
            i += 1
            continue
        n = len(text[i:]) - len(text[i:].lstrip("`"))  # the run of backticks at i
        close = re.compile(r"(?<!`)" + "`" * n + r"(?!`)").search(text, i + n)
        if close is None:
            i += n  # no closing run: the backticks are text
            continue
        content = text[i + n:close.start()]
        if len(content) > 1 and content[0] == content[-1] == " " and content.strip():
            content = content[1:-1]
        out.append(_text(text[start:i]) + f"<code>{escape(content)}</code>")
        i = start = close.end()
    out.append(_text(text[start:]))
    return "".join(out)


def _cells(line: str) -> list[str]:
    """A table row's cells, split at pipes that are not escaped (an escaped pipe is the
    cell's own, in a code span or not, as GitHub's tables read it)."""
    cells, current, i = [], [], 0
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    while i < len(body):
        if body[i] == "\\" and body[i + 1:i + 2] == "|":
            current.append("|")
            i += 2
            continue
        if body[i] == "|":
            cells.append("".join(current).strip())
            current = []
        else:
            current.append(body[i])
        i += 1
    if "".join(current).strip():
        cells.append("".join(current).strip())
    return cells


def _first_cell(cell: str, links: dict[str, str]) -> str:
    """A run table's trial cell, linked to its transcript page when there is one (and the
    Markdown has not linked it already)."""
    link = links.get(cell)
    return (f'<td><a href="{escape(link)}">{_inline(cell)}</a></td>' if link
            else f"<td>{_inline(cell)}</td>")


def markdown_to_html(markdown: str, links: dict[str, str] | None = None) -> list[str]:
    """The small Markdown subset the report uses: headings, bullets, pipe tables, paragraphs.
    `links`: trial id → transcript page; a table row whose first cell is a trial links it."""
    links = links or {}
    out: list[str] = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            out.append(f"<h{level}>{_inline(line[level:].strip())}</h{level}>")
        elif line.startswith("- "):
            out.append("<ul>")
            while i < len(lines) and lines[i].startswith("- "):
                out.append(f"<li>{_inline(lines[i][2:])}</li>")
                i += 1
            out.append("</ul>")
            continue
        elif line.startswith("|"):
            head = _cells(line)
            out.append('<div class="table"><table><thead><tr>'
                       + "".join(f"<th>{_inline(c)}</th>" for c in head)
                       + "</tr></thead><tbody>")
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                cells = _cells(lines[i])
                out.append("<tr>" + _first_cell(cells[0], links)
                           + "".join(f"<td>{_inline(c)}</td>" for c in cells[1:]) + "</tr>")
                i += 1
            out.append("</tbody></table></div>")
            continue
        elif line.strip():
            out.append(f"<p>{_inline(line)}</p>")
        i += 1
    return out


def forest_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per compared metric; the metric and the pair are separate label lines."""
    rows = []
    several = len(report["tracks"]) > 1
    for comp in report["comparisons"]:
        for metric, m in comp["metrics"].items():
            metric_label = LABELS[metric] + (f" ({comp['track']})" if several else "")
            rows.append({"metric": metric_label,
                         "comparison": f"{comp['candidate']} - {comp['baseline']}",
                         "delta": m["delta"], "low": m["ci_low"], "high": m["ci_high"]})
    return rows


def _every_column(report: dict[str, Any], links: dict[str, str]) -> list[str]:
    """The run table with every column, folded away under the trimmed one."""
    rows = report.get("trial_rows") or []
    if not rows or len(rows) > RUNS_SHOWN:
        return []
    table, _ = run_table(rows, trim=False)
    return (["<details><summary>Every column of every run</summary>"]
            + markdown_to_html("\n".join(table), links) + ["</details>"])


def render_html(report: dict[str, Any], links: dict[str, str] | None = None) -> str:
    """`links`: trial id → its transcript page (relative), linked from the run tables."""
    listed = len(report.get("trial_rows") or []) <= RUNS_SHOWN  # else no run table links
    by_cell = {inert(trial, 200): href for trial, href in (links or {}).items()} if listed else {}
    # a listed run links its page through by_cell; an unlisted study's Runs section says where
    # its pages are (or how to write them), so it is told whether there are any
    body = markdown_to_html(render_markdown(report, None if listed else links), by_cell)
    charts = {
        "Outcomes per condition": outcomes_chart(report["conditions"]),
        "Paired comparisons": forest_plot(forest_rows(report)),
        "Task x condition pass rate": pass_rate_grid(report["task_grid"],
                                                     list(report["conditions"])),
    }
    html: list[str] = []
    in_runs = False
    for element in body:
        if element.startswith("<h2>") and in_runs:
            html += _every_column(report, by_cell)
            in_runs = False
        html.append(element)
        in_runs = in_runs or element == "<h2>Runs</h2>"
        for heading, svg in charts.items():
            if element.startswith("<h2>") and element[4:].startswith(escape(heading)):
                html.append(svg)
    if in_runs:
        html += _every_column(report, by_cell)
    return page(f"evalq report: {report['study']['id']}", html)


def page(title: str, body: list[str]) -> str:
    """A whole HTML document around `body`'s elements: no script, nothing loaded (CSP)."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")
