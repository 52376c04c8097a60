"""Whether the study's power plan was recorded, and whether it came before the runs.

`evalq plan --write-lock` puts the plan in the lock's planning section, with a digest of its
own. A plan written after runs began (`--force`) may have chosen the repetitions after seeing
results, which is optional stopping; a section whose digest no longer matches was edited after
it was written. Either one is a reason the report's claims are exploratory.
"""

from __future__ import annotations

from typing import Any, Optional

from evalq.digest import data_digest

#: fields planning_section adds beside the body its digest covers (evalq.planning.lock)
_OUTSIDE_DIGEST = ("planning_digest", "planned_at")


def plan_record(lock: Optional[dict], first_run_at: Optional[float] = None) -> dict[str, Any]:
    """{"recorded", "before_runs", "attempts_at_planning", "intact", "planning_digest",
    "planned_at", "design", "note"}; before_runs is None when no plan (or an old one that did
    not say) was recorded.

    `first_run_at` is when the study's first attempt started (None before any did): a plan
    that says it came first but is dated later did not, whatever its section says."""
    section = (lock or {}).get("planning")
    if not isinstance(section, dict):
        return {"recorded": False, "before_runs": None, "attempts_at_planning": None,
                "intact": None, "planning_digest": None, "planned_at": None, "design": None,
                "note": "no power plan was recorded in the study lock"}
    prereg = section.get("preregistration") or {}
    body = {k: v for k, v in section.items() if k not in _OUTSIDE_DIGEST}
    intact = section.get("planning_digest") == data_digest(body)
    chosen = section.get("chosen_design") or None
    design = None if not isinstance(chosen, dict) else {
        k: chosen.get(k) for k in ("tasks", "repetitions", "trials")}
    before = prereg.get("before_runs")
    note = prereg.get("note")
    planned_at = section.get("planned_at")
    if before is True and first_run_at is not None and isinstance(planned_at, (int, float)) \
            and planned_at > first_run_at:
        before = False
        note = "dated after the study's first run started: not a pre-registration"
    if not intact:
        note = "the planning section was edited after it was written (its digest differs)"
    return {"recorded": True, "before_runs": before if isinstance(before, bool) else None,
            "attempts_at_planning": prereg.get("attempts_at_planning"), "intact": intact,
            "planning_digest": section.get("planning_digest"),
            "planned_at": planned_at, "design": design, "note": note}


def claim_reasons(record: dict[str, Any]) -> list[str]:
    """What in the plan record makes confirmatory claims exploratory."""
    if not record["recorded"]:
        return []
    if record["intact"] is False:
        return ["the power plan in the lock was edited after it was written"]
    if record["before_runs"] is False:
        if not record["attempts_at_planning"]:  # it said "before", its date says otherwise
            return ["the power plan is dated after the study's first run started: not a "
                    "pre-registration"]
        return [f"the power plan was written after {record['attempts_at_planning']} attempts "
                "had run: not a pre-registration"]
    return []


def describe(record: Optional[dict[str, Any]]) -> str:
    """One line for the report's header."""
    if not record or not record["recorded"]:
        return "none recorded"
    design = record["design"]
    shape = (f"{design['tasks']} tasks × {design['repetitions']} repetitions"
             if design and design.get("tasks") is not None else "no design met the target")
    if record["intact"] is False:
        when = "**edited after it was written**"
    elif record["before_runs"] is True:
        when = "written before the runs"
    elif record["before_runs"] is False and not record["attempts_at_planning"]:
        when = "**dated after the first run started** (not a pre-registration)"
    elif record["before_runs"] is False:
        when = (f"**written after {record['attempts_at_planning']} attempts had run** "
                "(not a pre-registration)")
    else:
        when = "unavailable (the plan does not say when it was written)"
    digest = (record["planning_digest"] or "")[:19]
    return f"{when}; {shape}; digest `{digest}…`"
