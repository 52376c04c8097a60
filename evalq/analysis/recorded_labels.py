"""Task labels a study recorded in its lock (a task manifest's tracks, splits, suitability).

Apart from analysis/tracks.py, which falls back to reading the study's manifest: a stage,
loaded while a manifest is, reads its baseline's recorded labels without importing the
manifest loader back.
"""

from __future__ import annotations

from typing import Optional

UNTRACKED = "untracked"


def recorded_labels(study_row) -> Optional[dict[str, dict]]:
    """{task: {track, split, suitable, skill_expected}} from the lock; None if none recorded."""
    recorded = (study_row.lock or {}).get("task_labels")
    if recorded is None:
        return None
    return {task: {"track": v.get("track") or UNTRACKED, "split": v.get("split"),
                   "suitable": v.get("suitable", True),
                   "skill_expected": v.get("skill_expected")}
            for task, v in recorded.items()}
