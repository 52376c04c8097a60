"""A wall-time forecast checked against the run: recorded at launch, compared in the report.

A forecast nobody checks can stay 10x wrong for ever. `evalq run` records the forecast it
launched with in the study's stored lock (outside lock_digest, like the planning section it
comes from); the report sets it beside the wall time the study took, so a forecast that does
not hold is seen on the first run that disproves it.
"""

from __future__ import annotations

import time
from typing import Any, Optional

from evalq.planning.forecast import RunDistributions, clock_text, forecast

#: the key of the launch record in the study's stored lock
LOCK_KEY = "wall_forecast"
#: what the actual wall time measures
MEASURED = "first attempts: the earliest enqueued to the last finished"


def launch_record(lock: dict[str, Any], trials: int, workers: Optional[int]) -> dict[str, Any]:
    """The wall-time forecast for `trials` trials on `workers` worker slots (the embedded
    concurrency, else the plan's --workers), from the lock's plan; with the reason when none
    can be made."""
    planning = (lock or {}).get("planning") or {}
    record: dict[str, Any] = {"recorded_at": time.time(), "trials": trials, "workers": workers,
                              "pilot": (planning.get("pilot") or {}).get("study_id"),
                              "method": None, "at_median": None, "at_p90": None, "note": None}
    if "run_distributions" not in planning:
        return dict(record, reason="no pilot plan in the study lock (`evalq plan STUDY --pilot "
                                   "PILOT --write-lock` records one)")
    if workers is None:
        workers = (planning.get("forecast") or {}).get("workers")
    wall = forecast(RunDistributions.from_dict(planning["run_distributions"]), trials,
                    workers)["wall_seconds"]
    return dict(record, workers=workers, method=wall["method"], at_median=wall["at_median"],
                at_p90=wall["at_p90"], note=wall["note"], reason=wall["reason"])


def record_at_launch(prepared: Any, workers: Optional[int]) -> None:
    """Put the launch record into the lock the study row is saved with (a study launched
    before keeps the record of its first launch: its row is not written again)."""
    row = prepared.row
    row.lock = dict(row.lock, **{LOCK_KEY: launch_record(row.lock, len(prepared.trials),
                                                         workers)})


def actual_wall_seconds(engine: Any, study_id: str) -> tuple[Optional[float], Optional[str]]:
    """(seconds, None) from the first attempts' timestamps, or (None, why not)."""
    from sqlalchemy import func, select

    from evalq.results.store import AttemptRow

    with engine.connect() as conn:
        first, last, rows, finished = conn.execute(
            select(func.min(AttemptRow.enqueued_at), func.max(AttemptRow.finished_at),
                   func.count(), func.count(AttemptRow.finished_at))
            .where(AttemptRow.study_id == study_id, AttemptRow.attempt == 1)).one()
    if not rows:
        return None, "no attempt has run"
    if finished < rows:
        return None, f"{rows - finished} of {rows} first attempts have not finished"
    if first is None or last is None:
        return None, "the attempts carry no enqueue or finish time (an imported study)"
    return float(last - first), None


def wall_time_check(engine: Any, study_id: str, lock: Optional[dict]) -> dict[str, Any]:
    """The report's block: the forecast recorded at launch, the wall time the study took,
    and how far apart they are (ratio actual / forecast; None when either is unknown)."""
    record = (lock or {}).get(LOCK_KEY)
    actual, why = actual_wall_seconds(engine, study_id)
    if not isinstance(record, dict):
        record = {"reason": "no forecast was recorded at launch (the study was launched "
                            "before evalq recorded one, or imported)"}
    predicted, p90 = record.get("at_median"), record.get("at_p90")
    known = predicted is not None and actual is not None and predicted > 0
    return {
        "forecast_seconds": predicted, "forecast_p90_seconds": p90,
        "forecast_method": record.get("method"), "forecast_note": record.get("note"),
        "forecast_reason": record.get("reason") if predicted is None else None,
        "workers": record.get("workers"), "trials_forecast": record.get("trials"),
        "pilot": record.get("pilot"),
        "actual_seconds": actual, "actual_reason": why, "measured": MEASURED,
        "ratio": actual / predicted if known else None,
        "error_seconds": actual - predicted if known else None,
        "within_p90": (actual <= p90) if actual is not None and p90 is not None else None,
    }


def describe(block: Optional[dict[str, Any]]) -> str:
    """One line for the report: forecast, actual, and the error."""
    if not block:
        return "unavailable"
    if block["forecast_seconds"] is None:
        forecast_text = f"no forecast ({block['forecast_reason']})"
    else:
        forecast_text = (f"forecast {clock_text(block['forecast_seconds'])} at the pilot's median "
                         f"run ({block['forecast_method']}, {block['workers']} workers)")
    if block["actual_seconds"] is None:
        return f"{forecast_text}; actual unavailable ({block['actual_reason']})"
    text = f"{forecast_text}; actual {clock_text(block['actual_seconds'])}"
    if block["ratio"] is not None:
        text += f": {block['ratio']:.2f}× the forecast"
        if block["within_p90"] is not None:
            text += (" (within" if block["within_p90"] else " (**beyond**") + \
                f" its 90th percentile, {clock_text(block['forecast_p90_seconds'])})"
    return text
