"""Inline SVG charts for the HTML report: drawn from the computed report, no scripts, no fonts to fetch.

Each function returns one ``<svg>`` element as text. Missing values are drawn as a hatched
'unavailable' cell or omitted with a label, never as a zero-length bar.
"""

from __future__ import annotations

from html import escape
from typing import Any, Optional

from evalq.models import OUTCOMES

COLORS = {"correct": "#2e7d32", "incorrect": "#c62828", "timed_out": "#ef6c00",
          "grading_failure": "#6a1b9a", "infrastructure_failure": "#546e7a"}
FONT = 'font-family="sans-serif" font-size="12"'


def _svg(width: int, height: int, body: list[str], label: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{escape(label)}" '
            f'class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}">'
            f"<title>{escape(label)}</title>" + "".join(body) + "</svg>")


def outcomes_chart(conditions: dict[str, dict[str, Any]]) -> str:
    """Stacked horizontal bars: each condition's trials split by outcome (pending in grey)."""
    names = list(conditions)
    left, bar_w, row_h = 160, 420, 28
    height = 40 + row_h * len(names) + 30
    body = []
    for i, name in enumerate(names):
        y = 20 + i * row_h
        summary = conditions[name]
        planned = summary["trials"]["planned"] or 1
        x = float(left)
        body.append(f'<text x="{left - 8}" y="{y + 15}" text-anchor="end" {FONT}>'
                    f"{escape(name)}</text>")
        for outcome in OUTCOMES:
            n = summary["outcomes"][outcome]
            if not n:
                continue
            w = bar_w * n / planned
            body.append(f'<rect class="bar outcome-{outcome}" x="{x:.1f}" y="{y}" '
                        f'width="{w:.1f}" height="20" fill="{COLORS[outcome]}">'
                        f"<title>{escape(name)}: {outcome} {n}</title></rect>")
            x += w
        pending = summary["trials"]["pending"]
        if pending:
            w = bar_w * pending / planned
            body.append(f'<rect class="bar pending" x="{x:.1f}" y="{y}" width="{w:.1f}" '
                        f'height="20" fill="#bdbdbd"><title>{escape(name)}: pending {pending}'
                        "</title></rect>")
    y = 30 + row_h * len(names)
    x = 10
    for outcome in OUTCOMES:
        body.append(f'<rect x="{x}" y="{y}" width="10" height="10" fill="{COLORS[outcome]}"/>'
                    f'<text x="{x + 14}" y="{y + 10}" {FONT}>{outcome}</text>')
        x += 14 + 8 * len(outcome) + 12
    return _svg(max(left + bar_w + 20, x), height, body, "Outcomes per condition")


def forest_plot(rows: list[dict[str, Any]]) -> str:
    """Paired differences with their 95% CIs on a -1..1 axis; rows: {label, delta, low, high}."""
    left, width, row_h = 260, 360, 24
    height = 50 + row_h * max(1, len(rows))

    def sx(v: float) -> float:
        return left + (max(-1.0, min(1.0, v)) + 1.0) / 2.0 * width

    body = [f'<line x1="{sx(0):.1f}" y1="10" x2="{sx(0):.1f}" y2="{height - 30}" '
            'stroke="#555" stroke-dasharray="4 3"/>']
    for tick in (-1.0, -0.5, 0.0, 0.5, 1.0):
        body.append(f'<text x="{sx(tick):.1f}" y="{height - 12}" text-anchor="middle" {FONT}>'
                    f"{tick:+.1f}</text>")
    for i, row in enumerate(rows):
        y = 22 + i * row_h
        body.append(f'<text x="{left - 8}" y="{y + 4}" text-anchor="end" {FONT}>'
                    f"{escape(row['label'])}</text>")
        if row["delta"] is None or row["low"] is None or row["high"] is None:
            body.append(f'<text class="unavailable" x="{sx(0) + 6:.1f}" y="{y + 4}" {FONT} '
                        'fill="#777">unavailable</text>')
            continue
        body.append(f'<line class="ci" x1="{sx(row["low"]):.1f}" y1="{y}" '
                    f'x2="{sx(row["high"]):.1f}" y2="{y}" stroke="#1565c0" stroke-width="2"/>')
        body.append(f'<circle class="delta" cx="{sx(row["delta"]):.1f}" cy="{y}" r="5" '
                    f'fill="#1565c0"><title>{escape(row["label"])}: {row["delta"]:+.3f} '
                    f'[{row["low"]:+.3f}, {row["high"]:+.3f}]</title></circle>')
    return _svg(left + width + 30, height, body, "Paired differences with 95% CIs")


def _cell_color(rate: Optional[float]) -> str:
    if rate is None:
        return "url(#hatch)"
    red, green = int(198 + (46 - 198) * rate), int(40 + (125 - 40) * rate)
    return f"rgb({red},{green},50)"


def pass_rate_grid(grid: dict[str, dict[str, Any]], names: list[str]) -> str:
    """Task x condition cells shaded by pass rate; hatched where no valid run exists."""
    left, cell_w, cell_h = 240, 110, 24
    width = left + cell_w * max(1, len(names)) + 10
    height = 30 + cell_h * max(1, len(grid)) + 10
    body = ['<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
            'patternTransform="rotate(45)"><rect width="6" height="6" fill="#eee"/>'
            '<line x1="0" y1="0" x2="0" y2="6" stroke="#999" stroke-width="2"/></pattern></defs>']
    for j, name in enumerate(names):
        body.append(f'<text x="{left + j * cell_w + cell_w / 2:.0f}" y="18" text-anchor="middle" '
                    f"{FONT}>{escape(name)}</text>")
    for i, (task, row) in enumerate(grid.items()):
        y = 26 + i * cell_h
        label = task + (f" [{row['split']}]" if row.get("split") else "")
        body.append(f'<text x="{left - 8}" y="{y + 16}" text-anchor="end" {FONT}>'
                    f"{escape(label)}</text>")
        for j, name in enumerate(names):
            rate = row["pass_rate"].get(name)
            text = "unavailable" if rate is None else f"{rate:.0%}"
            x = left + j * cell_w
            body.append(f'<rect class="cell" x="{x + 2}" y="{y}" width="{cell_w - 4}" '
                        f'height="{cell_h - 4}" fill="{_cell_color(rate)}">'
                        f"<title>{escape(task)} / {escape(name)}: {text}</title></rect>")
            fill = "#333" if rate is None else "#fff"
            body.append(f'<text x="{x + cell_w / 2:.0f}" y="{y + 15}" text-anchor="middle" '
                        f'fill="{fill}" {FONT}>{text}</text>')
    return _svg(width, height, body, "Task x condition pass rate")
