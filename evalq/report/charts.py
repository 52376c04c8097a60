"""Inline SVG charts for the HTML report: drawn from the computed report, no scripts, no fonts to fetch.

Each function returns one ``<svg>`` element as text. SVG text never wraps and whatever leaves
the viewBox is cut off without a trace, so every gutter is sized from the widest label it holds
(evalq.report.textwidth) instead of a fixed guess. Missing values are drawn as a hatched
'unavailable' cell or a labelled gap, never as a zero-length bar.
"""

from __future__ import annotations

from html import escape
from typing import Any, Iterable, Optional

from evalq.models import OUTCOMES
from evalq.report import fmt
from evalq.report.palette import OUTCOME_COLORS, PENDING_COLOR, VIRIDIS, ink, viridis
from evalq.report.textwidth import text_width

SIZE = 12
FONT = f'font-family="sans-serif" font-size="{SIZE}"'
PAD = 8  # between a label and what it labels
HATCH = ('<pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
         'patternTransform="rotate(45)"><rect width="6" height="6" fill="#eee"/>'
         '<line x1="0" y1="0" x2="0" y2="6" stroke="#999" stroke-width="2"/></pattern>')


def _svg(width: float, height: float, body: list[str], label: str) -> str:
    width, height = int(width + 0.999), int(height + 0.999)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{escape(label)}" '
            f'class="chart" width="{width}" height="{height}" viewBox="0 0 {width} {height}">'
            f"<title>{escape(label)}</title>" + "".join(body) + "</svg>")


def _text(x: float, y: float, text: str, anchor: str = "start", css: str = "label",
          fill: str = "#222") -> str:
    return (f'<text class="{css}" x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" fill="{fill}" '
            f"{FONT}>{escape(text)}</text>")


def _widest(texts: Iterable[str]) -> float:
    return max((text_width(t, SIZE) for t in texts), default=0.0)


def _legend(items: list[tuple[str, str]], y: float, max_width: float) -> tuple[list[str], float]:
    """Swatch + name pairs, wrapped onto as many lines as `max_width` needs; returns the
    elements and the y below the last line."""
    body, x = [], 0.0
    for name, color in items:
        item_w = 14 + text_width(name, SIZE) + 16
        if x and x + item_w > max_width:
            x, y = 0.0, y + 18
        body.append(f'<rect x="{x + 2:.1f}" y="{y:.1f}" width="10" height="10" fill="{color}"/>')
        body.append(_text(x + 16, y + 10, name, css="legend"))
        x += item_w
    return body, y + 18


def _axis(x0: float, width: float, y: float, ticks: list[tuple[float, str]], title: str,
          grid_top: float) -> list[str]:
    """A horizontal axis under a plot: baseline, gridlines up to `grid_top`, tick labels."""
    body = [f'<line x1="{x0:.1f}" y1="{y:.1f}" x2="{x0 + width:.1f}" y2="{y:.1f}" stroke="#555"/>']
    for frac, label in ticks:
        x = x0 + frac * width
        body.append(f'<line x1="{x:.1f}" y1="{grid_top:.1f}" x2="{x:.1f}" y2="{y + 4:.1f}" '
                    'stroke="#ddd"/>')
        body.append(_text(x, y + 16, label, "middle", css="tick"))
    body.append(_text(x0 + width / 2, y + 32, title, "middle", css="axis-title"))
    return body


def _segments(summary: dict[str, Any]) -> list[tuple[str, int, str]]:
    """(name, count, colour) of each non-empty part of a condition's bar, pending last."""
    parts = [(o, summary["outcomes"][o], OUTCOME_COLORS[o]) for o in OUTCOMES]
    parts.append(("pending", summary["trials"]["pending"], PENDING_COLOR))
    return [p for p in parts if p[1]]


def outcomes_chart(conditions: dict[str, dict[str, Any]]) -> str:
    """Stacked horizontal bars: each condition's trials split by outcome (pending in grey), each
    part labelled with its count, on a 0-100% of planned trials axis."""
    names = list(conditions)
    gutter = _widest(names) + 2 * PAD
    bar_w, row_h, top = 420.0, 28, 10
    body, notes = [], []
    for i, name in enumerate(names):
        y = top + i * row_h
        summary = conditions[name]
        planned = summary["trials"]["planned"]
        body.append(_text(gutter - PAD, y + 15, name, "end"))
        x, squeezed = gutter, []
        for part, n, color in _segments(summary):
            w = bar_w * n / (planned or 1)
            body.append(f'<rect class="bar outcome-{part}" x="{x:.1f}" y="{y}" width="{w:.1f}" '
                        f'height="20" fill="{color}"><title>{escape(name)}: {part} {n}</title>'
                        "</rect>")
            if text_width(str(n), SIZE) + 4 <= w:
                body.append(_text(x + w / 2, y + 14.5, str(n), "middle", "count", ink(color)))
            else:
                squeezed.append(f"{part} {n}")
            x += w
        notes.append(", ".join([f"n={planned}", *squeezed]))
    for i, note in enumerate(notes):
        body.append(_text(gutter + bar_w + PAD, top + i * row_h + 15, note, css="note"))
    axis_y = top + row_h * len(names) + 2
    ticks = [(f, fmt.percent(f)) for f in (0.0, 0.25, 0.5, 0.75, 1.0)]
    body = _axis(gutter, bar_w, axis_y, ticks, "share of planned trials", top - 4) + body
    width = gutter + bar_w + PAD + max(_widest(notes), text_width("100%", SIZE) / 2) + PAD
    items = [(o, OUTCOME_COLORS[o]) for o in OUTCOMES] + [("pending", PENDING_COLOR)]
    legend, bottom = _legend(items, axis_y + 44, max(width, 600))
    return _svg(max(width, 600), bottom, body + legend, "Outcomes per condition")


def forest_plot(rows: list[dict[str, Any]]) -> str:
    """Paired differences with their 95% CIs on a -1..1 axis, the numbers printed beside them.
    rows: {metric, comparison, delta, low, high}. Rows of one comparison sit under a heading
    line naming the pair, so a long 'candidate - baseline' is printed once across the chart
    rather than widening the gutter of every metric row."""
    gutter = _widest(r["metric"] for r in rows) + 2 * PAD
    plot_w, row_h, head_h = 360.0, 24, 22
    left = gutter + PAD  # room for a dot at -1 beside its label
    zero = _sx(0.0, left, plot_w)
    body, values, y, previous = [], [], 0.0, None
    for row in rows:
        if row["comparison"] != previous:
            y += 8 if previous is None else 16
            previous = row["comparison"]
            body.append(_text(0, y + 12, previous, css="comparison"))
            y += head_h
            body.append(f'<line x1="{zero:.1f}" y1="{y:.1f}" x2="{zero:.1f}" '
                        f'y2="{y + row_h * sum(r["comparison"] == previous for r in rows):.1f}" '
                        'stroke="#555" stroke-dasharray="4 3"/>')
        mid = y + row_h / 2
        body.append(_text(gutter - PAD, mid + 4, row["metric"], "end"))
        if row["delta"] is None or row["low"] is None or row["high"] is None:
            value = fmt.UNAVAILABLE
            body.append(_text(left + plot_w + 2 * PAD, mid + 4, value, css="unavailable value",
                              fill="#666"))
        else:
            value = f"{fmt.signed(row['delta'])} {fmt.interval(row['low'], row['high'], True)}"
            body.append(f'<line class="ci" x1="{_sx(row["low"], left, plot_w):.1f}" '
                        f'y1="{mid}" x2="{_sx(row["high"], left, plot_w):.1f}" y2="{mid}" '
                        'stroke="#0072b2" stroke-width="2"/>')
            body.append(f'<circle class="delta" cx="{_sx(row["delta"], left, plot_w):.1f}" '
                        f'cy="{mid}" r="5" fill="#0072b2"><title>{escape(row["metric"])} '
                        f'{escape(row["comparison"])}: {escape(value)}</title></circle>')
            body.append(_text(left + plot_w + 2 * PAD, mid + 4, value, css="value"))
        values.append(value)
        y += row_h
    ticks = [((t + 1) / 2, fmt.signed(t, 1)) for t in (-1.0, -0.5, 0.0, 0.5, 1.0)]
    axis = _axis(left, plot_w, y + 4, ticks, "difference (candidate - baseline)", y + 4)
    width = max(left + plot_w + 2 * PAD + _widest(values or ["+1.0"]),
                _widest(r["comparison"] for r in rows)) + PAD
    return _svg(width, y + 44, axis + body, "Paired differences with 95% CIs")


def _sx(value: float, left: float, width: float) -> float:
    """Position of a difference on the -1..1 axis (clamped: rates cannot differ by more)."""
    return left + (max(-1.0, min(1.0, value)) + 1.0) / 2.0 * width


def _cell_color(rate: Optional[float]) -> str:
    return "url(#hatch)" if rate is None else viridis(rate)


def pass_rate_grid(grid: dict[str, dict[str, Any]], names: list[str]) -> str:
    """Task x condition cells shaded by pass rate on viridis; hatched where no valid run exists.
    Each column is as wide as its condition's name, the task gutter as wide as its labels."""
    labels = [task + (f" [{row['split']}]" if row.get("split") else "")
              for task, row in grid.items()]
    gutter = _widest(labels) + 2 * PAD
    cols = [max(90.0, text_width(n, SIZE) + 2 * PAD) for n in names]
    lefts = [gutter + sum(cols[:j]) for j in range(len(names))]
    cell_h, top = 24, 28
    body = [f"<defs>{HATCH}<linearGradient id=\"viridis\">"
            + "".join(f'<stop offset="{i / (len(VIRIDIS) - 1):.2f}" stop-color="{c}"/>'
                      for i, c in enumerate(VIRIDIS)) + "</linearGradient></defs>"]
    for j, name in enumerate(names):
        body.append(_text(lefts[j] + cols[j] / 2, 18, name, "middle", "column"))
    for i, ((task, row), label) in enumerate(zip(grid.items(), labels)):
        y = top + i * cell_h
        body.append(_text(gutter - PAD, y + 15, label, "end"))
        for j, name in enumerate(names):
            rate = row["pass_rate"].get(name)
            text = fmt.percent(rate)
            fill = _cell_color(rate)
            body.append(f'<rect class="cell" x="{lefts[j] + 2:.1f}" y="{y}" '
                        f'width="{cols[j] - 4:.1f}" height="{cell_h - 4}" fill="{fill}">'
                        f"<title>{escape(task)} / {escape(name)}: {text}</title></rect>")
            color = "#333333" if rate is None else ink(fill)
            body.append(_text(lefts[j] + cols[j] / 2, y + 14.5, text, "middle", "count", color))
    y = top + cell_h * max(1, len(grid)) + 8
    scale_w = 200.0
    body.append(f'<rect x="{gutter:.1f}" y="{y}" width="{scale_w}" height="10" '
                'fill="url(#viridis)"/>')
    body.append(_text(gutter, y + 24, "0%", "middle", "tick"))
    body.append(_text(gutter + scale_w, y + 24, "100%", "middle", "tick"))
    body.append(_text(gutter + scale_w + 24, y + 10, "pass rate (viridis)", css="legend"))
    width = max(gutter + sum(cols), gutter + scale_w + 24 + text_width("pass rate (viridis)"))
    return _svg(width + PAD, y + 30, body, "Task x condition pass rate")
