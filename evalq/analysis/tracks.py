"""Grouping results by adoption track and split : results are never pooled across tracks."""

from __future__ import annotations

from pathlib import Path

from evalq.analysis.recorded_labels import UNTRACKED, recorded_labels
from evalq.errors import UserError
from evalq.study.manifest import load_manifest


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
    recorded = recorded_labels(study_row)
    if recorded is not None:
        return recorded
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


#: outcomes that say something about the agent (evalq/report/attempts.py's VALID)
_JUDGED = frozenset(("correct", "incorrect", "timed_out"))


def split_results(runs, tasks, names, labels: dict[str, dict]) -> dict[str, dict]:
    """Per split (regression, held-out; 'unlabelled' when unknown) and condition: tasks,
    judged runs, correct runs and their share, so no summary pools regression and unseen
    tasks. The share is None when no run was judged. One pass over the runs."""
    split_of = {task: labels.get(task, {}).get("split") or "unlabelled" for task in tasks}
    sizes: dict[str, int] = {}
    for split in split_of.values():
        sizes[split] = sizes.get(split, 0) + 1
    tally = {(split, name): [0, 0] for split in sizes for name in names}  # judged, correct
    for run in runs:
        split = split_of.get(run.task)
        if split is None or run.outcome not in _JUDGED or (split, run.condition) not in tally:
            continue
        cell = tally[(split, run.condition)]
        cell[0] += 1
        cell[1] += run.outcome == "correct"
    return {split: {name: {"tasks": sizes[split], "runs": tally[(split, name)][0],
                           "correct": tally[(split, name)][1],
                           "success_rate": (tally[(split, name)][1] / tally[(split, name)][0]
                                            if tally[(split, name)][0] else None)}
                    for name in names}
            for split in sorted(sizes)}
