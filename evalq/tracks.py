"""Adoption-track rules for fixtures in a study (SPEC S3), checked when a manifest loads."""

from __future__ import annotations

from pathlib import Path

from evalq.errors import UserError

TRACKS = ("free-selection", "directed-integration", "upgrade")


def check_tracks(manifest, fixtures, path: Path) -> None:
    """A free-selection prompt must not name the package, a directed one must, upgrades pin versions."""
    for fixture in fixtures:
        spec = fixture.spec
        if spec.track is None:
            continue
        where = fixture.path / "fixture.toml"
        if spec.track not in TRACKS:
            raise UserError(f"unknown track '{spec.track}'", file=where, field="track",
                            fix=f"use one of {', '.join(TRACKS)}")
        package = (spec.package or "").strip()
        if spec.track in ("free-selection", "directed-integration") and not package:
            raise UserError("a track task must name the package under study", file=where,
                            field="package", fix="set package = \"<name>\"")
        named = bool(package) and package.lower() in spec.prompt.lower()
        if spec.track == "free-selection" and named:
            raise UserError(f"a free-selection prompt must not name '{package}'", file=where,
                            field="prompt", fix="describe the need without the package name")
        if spec.track == "directed-integration" and not named:
            raise UserError(f"a directed-integration prompt must name '{package}'", file=where,
                            field="prompt", fix="name the package the task requires")
        if spec.track == "upgrade":
            for key in ("baseline_version", "target_version"):
                if not getattr(spec, key):
                    raise UserError("an upgrade task needs baseline_version and target_version",
                                    file=where, field=key, fix=f"set {key} = \"<version>\"")


# ---------------------------------------------------------------- grouping results
UNTRACKED = "untracked"


def labels_from_fixtures(fixtures) -> dict[str, dict]:
    """{task: {track, split, suitable}} from loaded fixtures; a task with no track is 'untracked'."""
    return {f.id: {"track": f.spec.track or UNTRACKED, "split": f.spec.split,
                   "suitable": f.spec.suitable} for f in fixtures}


def task_labels(study_row) -> dict[str, dict]:
    """Labels for a stored study: recorded at import, else read from its manifest's fixtures.

    A study whose manifest has moved gets no labels (every task 'untracked', split unknown)
    rather than guessed ones.
    """
    recorded = (study_row.lock or {}).get("task_labels")
    if recorded is not None:
        return {task: {"track": v.get("track") or UNTRACKED, "split": v.get("split"),
                       "suitable": v.get("suitable", True)} for task, v in recorded.items()}
    path = study_row.manifest_path
    if path and Path(path).is_file():
        from evalq.manifest import load_study

        try:
            return labels_from_fixtures(load_study(path, verify_fixtures=False).fixtures)
        except UserError:
            return {}
    return {}


def group_by_track(tasks, labels: dict[str, dict]) -> dict[str, list[str]]:
    """Tasks per track, sorted; results are reported per group and never pooled across them."""
    groups: dict[str, list[str]] = {}
    for task in sorted(set(tasks)):
        groups.setdefault(labels.get(task, {}).get("track") or UNTRACKED, []).append(task)
    return groups
