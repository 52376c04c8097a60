"""Grouping results by adoption track and split : results are never pooled across tracks."""

from __future__ import annotations

from pathlib import Path

from evalq.errors import UserError
from evalq.study.manifest import load_manifest

UNTRACKED = "untracked"


def labels_from_fixtures(fixtures) -> dict[str, dict]:
    """{task: {track, split, suitable, skill_expected}} from loaded fixtures; a task with no
    track is 'untracked'."""
    return {f.id: {"track": f.spec.track or UNTRACKED, "split": f.spec.split,
                   "suitable": f.spec.suitable, "skill_expected": f.spec.skill_expected}
            for f in fixtures}


def task_labels(study_row) -> dict[str, dict]:
    """Labels for a stored study: recorded at import, else read from its manifest's fixtures.

    A study whose manifest has moved gets no labels (every task 'untracked', split unknown)
    rather than guessed ones.
    """
    recorded = (study_row.lock or {}).get("task_labels")
    if recorded is not None:
        return {task: {"track": v.get("track") or UNTRACKED, "split": v.get("split"),
                       "suitable": v.get("suitable", True),
                       "skill_expected": v.get("skill_expected")}
                for task, v in recorded.items()}
    path = study_row.manifest_path
    if path and Path(path).is_file():
        try:
            return labels_from_fixtures(load_manifest(path, verify_fixtures=False).fixtures)
        except UserError:
            return {}
    return {}


def group_by_track(tasks, labels: dict[str, dict]) -> dict[str, list[str]]:
    """Tasks per track, sorted; results are reported per group and never pooled across them."""
    groups: dict[str, list[str]] = {}
    for task in sorted(set(tasks)):
        groups.setdefault(labels.get(task, {}).get("track") or UNTRACKED, []).append(task)
    return groups
