"""Markdown for skill activation: per model, each condition's totals, then each case's loads,
misses, false positives and latency per condition."""

from __future__ import annotations

from typing import Any

from evalq.report import fmt
from evalq.report.mdtext import inert


def _expected(value) -> str:
    return {True: "should activate", False: "should not activate"}.get(value, "undeclared")


def _seconds(lat: dict[str, Any]) -> str:
    if not lat["runs"]:
        return fmt.UNAVAILABLE
    text = (f"median {fmt.number(lat['median'], 2)} s (min {fmt.number(lat['min'], 2)}, "
            f"max {fmt.number(lat['max'], 2)}; {lat['runs']} runs)")
    return text + (f", {lat['unreported']} unreported" if lat["unreported"] else "")


def activation_lines(report: dict[str, Any]) -> list[str]:
    block = report.get("skill_activation")
    if not block:
        return []
    lines = ["## Skill activation", "", block["rule"] + ".", ""]
    for model, part in block["models"].items():
        lines += [f"### Model {inert(model, 120, False)}", "",
                  "| condition | skill | skill revision | loaded | not loaded | unknown | "
                  "misses | false positives |", "|---|---|---|---|---|---|---|---|"]
        for name, s in part["conditions"].items():
            lines.append(
                f"| {inert(name, 80)} | {inert(s['skill'], 80) or 'none'} | "
                f"{inert(s['skill_commit'], 80) or 'none'} | {s['loaded']} | {s['not_loaded']} | "
                f"{s['unknown']} | {fmt.count(s['misses'])} of {s['miss_runs']} | "
                f"{fmt.count(s['false_positives'])} of {s['false_positive_runs']} |")
        lines += ["", "| case | expected | condition | loaded | not loaded | unknown | misses | "
                  "false positives | latency |", "|---|---|---|---|---|---|---|---|---|"]
        for case, entry in part["cases"].items():
            for name, c in entry["conditions"].items():
                why = f" ({inert(c['reason'], 120, False)})" if c["reason"] else ""
                lines.append(
                    f"| {inert(case, 120)} | {_expected(entry['skill_expected'])} | "
                    f"{inert(name, 80)} | {c['loaded']} | {c['not_loaded']} | {c['unknown']} | "
                    f"{fmt.count(c['misses'])}{why} | {fmt.count(c['false_positives'])} | "
                    f"{_seconds(c['latency_seconds'])} |")
        lines.append("")
    return lines
