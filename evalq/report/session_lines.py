"""The report's "First visible check vs eventual success" section, per track."""

from __future__ import annotations

from typing import Any

from evalq.report import fmt
from evalq.report.mdtext import inert

COST_LABELS = (("repair_check_runs", "visible-check runs after the first"),
               ("commands_after_first_check", "commands after the first check"),
               ("elapsed_seconds", "seconds from the first check to the end"),
               ("input_tokens_after_first_check", "input tokens after the first check"),
               ("output_tokens_after_first_check", "output tokens after the first check"),
               ("human_interventions", "human interventions"))


def session_lines(report: dict[str, Any]) -> list[str]:
    block = report.get("session_first_check") or {}
    if not block:
        return []
    names = list(report["conditions"])
    head = "| | " + " | ".join(inert(n, 80) for n in names) + " |"
    rule = "|---|" + "---|" * len(names)
    lines = ["## First visible check vs eventual success", "",
             "The first attempt is the hidden tests' verdict on the workspace as it was when "
             "the agent first ran the task's visible check (snapshotted by the worker before "
             "the check ran); the eventual result is the verdict on the final workspace. They "
             "are kept apart: a later repair does not erase a failed first attempt. Rates are "
             "the mean over tasks of the share of correct runs, with the 95% bootstrap CI over "
             "tasks; a run that never ran the visible check has no first attempt (null, "
             "counted apart, never as a failure). Both come from the attempt the queue counts "
             "(its first valid attempt, a different notion). Repair cost is counted from the "
             "first check to the agent's end: median (min–max) over the runs that report it. "
             "Tracks are never pooled.", ""]
    for track, conditions in block.items():
        cells = [conditions[n] for n in names]
        lines += [f"### Track {inert(track, 80)}", "", head, rule,
                  "| first-check success | " + " | ".join(_rate(c["first_check"])
                                                         for c in cells) + " |",
                  "| eventual success | " + " | ".join(_rate(c["eventual"]) for c in cells)
                  + " |",
                  "| never ran the visible check | " + " | ".join(
                      f"{c['never_checked']}/{c['runs']}" for c in cells) + " |",
                  "| first check not graded | " + " | ".join(
                      str(c["first_check_ungraded"]) for c in cells) + " |",
                  "| repaired (first incorrect, eventually correct) | " + " | ".join(
                      str(c["repaired"]) for c in cells) + " |",
                  "| lost (first correct, eventually not) | " + " | ".join(
                      str(c["lost_after_first_check"]) for c in cells) + " |"]
        for key, label in COST_LABELS:
            lines.append(f"| {label} | " + " | ".join(_cost(c["repair_cost"][key])
                                                      for c in cells) + " |")
        lines.append("")
    return lines


def _rate(entry: dict[str, Any]) -> str:
    runs = entry["runs"]
    if entry["estimate"] is None:
        return f"{fmt.UNAVAILABLE} ({entry['reason']})"
    nulls = f", {runs['unresolved']} null" if runs["unresolved"] else ""
    return f"{fmt.estimate(entry)} ({runs['passed']}/{runs['passed'] + runs['failed']} runs" \
           f"{nulls})"


def _cost(entry: dict[str, Any]) -> str:
    if entry["median"] is None:
        return f"{fmt.UNAVAILABLE} ({inert(entry.get('reason') or 'not reported', 160)})"
    missing = f", {entry['unavailable']} unavailable" if entry["unavailable"] else ""
    return (f"{fmt.number(entry['median'])} ({fmt.number(entry['min'])}–"
            f"{fmt.number(entry['max'])}; n={entry['n']}{missing})")
