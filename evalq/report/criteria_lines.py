"""The report's "Named criteria" section: each criterion's rate per condition, per track."""

from __future__ import annotations

from typing import Any

from evalq.report import fmt
from evalq.report.mdtext import inert


def criteria_lines(report: dict[str, Any]) -> list[str]:
    block = report.get("criteria") or {}
    if not block:
        return []
    names = list(report["conditions"])
    lines = ["## Named criteria", "",
             "Each criterion's rate is the mean over tasks of the share of runs that met it, "
             "with its 95% bootstrap CI over tasks; runs whose result is unresolved (not rated "
             "yet, no trajectory) are counted apart, never as failures. The run's outcome comes "
             "from the required criteria. Tracks are never pooled.", ""]
    for track, criteria in block.items():
        lines += [f"### Track {inert(track, 80)}", "",
                  "| criterion | kind | required | " + " | ".join(inert(n, 80) for n in names)
                  + " |", "|---|---|---|" + "---|" * len(names)]
        for name, entry in criteria.items():
            kind = entry["kind"] if isinstance(entry["kind"], str) else "/".join(entry["kind"])
            cells = [_cell(entry["conditions"][n]) for n in names]
            lines.append(f"| {inert(name, 120)} | {kind} | {fmt.yes_no(entry['required'])} | "
                         + " | ".join(cells) + " |")
        lines.append("")
    return lines


def _cell(rate: dict[str, Any]) -> str:
    runs = rate["runs"]
    unresolved = f"{runs['unresolved']} unresolved" if runs["unresolved"] else ""
    if rate["estimate"] is None:
        return f"{fmt.UNAVAILABLE} ({unresolved or rate['reason']})"
    counts = f"{runs['passed']}/{runs['passed'] + runs['failed']} runs"
    return f"{fmt.estimate(rate)} ({counts}{', ' + unresolved if unresolved else ''})"
