"""Grading integrity in the report: tampered attempts counted and listed apart, and how many
grades came from the weaker in-process verdict (issue 14)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from evalq.report.mdtext import inert


def integrity_block(views) -> dict[str, Any]:
    """Every finished attempt's `tampered` and `verdict` (from its grade record)."""
    tampered, verdicts = [], Counter()
    for view in views:
        for attempt in view.attempts:
            if attempt.outcome is None:
                continue
            grade = attempt.grade or {}
            verdicts[grade.get("verdict") or "unrecorded"] += 1
            if grade.get("tampered"):
                tampered.append({"trial_id": view.trial_id, "fixture": view.fixture_id,
                                 "condition": view.condition, "attempt": attempt.attempt,
                                 "reason": attempt.reason})
    return {"tampered_count": len(tampered), "tampered": tampered, "verdicts": dict(verdicts),
            "note": ("in-process grades run the hidden tests in the agent code's process, a "
                     "weaker guarantee than a judge apart" if verdicts.get("in-process")
                     else None)}


def integrity_lines(block: dict[str, Any] | None) -> list[str]:
    if not block:
        return []
    verdicts = ", ".join(f"{inert(k, 60, False)}: {v}"
                         for k, v in sorted(block["verdicts"].items())) or "none"
    lines = ["## Grading integrity", "", f"Verdicts by kind: {verdicts}.",
             f"Tampered attempts (graded incorrect): {block['tampered_count']}.", ""]
    if block.get("note"):
        lines += [f"Note: {block['note']}.", ""]
    if block["tampered"]:
        lines += ["| trial | fixture | condition | attempt | reason |", "|---|---|---|---|---|"]
        lines += [f"| {inert(t['trial_id'], 200)} | {inert(t['fixture'], 120)} | "
                  f"{inert(t['condition'], 80)} | {t['attempt']} | {inert(t['reason'], 200)} |"
                  for t in block["tampered"]]
        lines.append("")
    return lines
