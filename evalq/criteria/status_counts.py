"""Named criteria in `evalq status`: per criterion and condition, how many counted runs met it.

Read from the stored results of each trial's counted attempt (the first valid one), review
criteria resolved from the ratings stored with it; one query, and only over attempts that have
criterion results, so a study without named criteria costs one empty read.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Text, cast, select

from evalq.criteria.review import resolved
from evalq.plaintext import one_line
from evalq.report.attempts import VALID
from evalq.results.store import AttemptRow, TrialRow


def criteria_counts(engine, study_id: str) -> dict[str, dict[str, dict[str, int]]]:
    """{criterion: {condition: {met, not_met, unresolved}}} over counted runs."""
    a, t = AttemptRow.__table__.c, TrialRow.__table__.c
    statement = (select(a.trial_id, a.attempt, a.outcome, t.condition,
                        cast(a.criterion_results, Text), cast(a.grade, Text))
                 .join(TrialRow.__table__, t.id == a.trial_id)
                 .where(a.study_id == study_id, a.criterion_results.isnot(None))
                 .order_by(a.trial_id, a.attempt))
    with engine.connect() as conn:
        rows = conn.execute(statement).all()
    counted: dict[str, tuple] = {}
    for trial_id, _attempt, outcome, condition, results, grade in rows:
        if outcome in VALID and trial_id not in counted:
            counted[trial_id] = (condition, results, grade)
    out: dict[str, dict[str, dict[str, int]]] = {}
    for condition, results, grade in counted.values():
        for result in resolved(_json(results), _json(grade)) or []:
            cell = out.setdefault(str(result.get("name")), {}).setdefault(
                condition, {"met": 0, "not_met": 0, "unresolved": 0})
            key = {True: "met", False: "not_met"}.get(result.get("passed"), "unresolved")
            cell[key] += 1
    return out


def criteria_lines(counts: dict[str, dict[str, dict[str, int]]]) -> list[str]:
    """`status` lines: one per criterion, met/judged per condition (unresolved apart)."""
    lines = []
    for name, by_condition in counts.items():
        shown = ", ".join(
            f"{cond} {c['met']}/{c['met'] + c['not_met']}"
            + (f" ({c['unresolved']} unresolved)" if c["unresolved"] else "")
            for cond, c in by_condition.items())
        lines.append(f"  {'criterion':<14} {one_line(name, 120)}: {shown}")
    return lines


def _json(text: Any) -> Any:
    try:
        return json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None
