"""`evalq study validate|freeze`."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import click

from evalq.fileio import load_document
from evalq.study.lock import freeze, verify_lock
from evalq.study.manifest import load_manifest
from evalq.study.task_manifest import is_task_manifest, load_task_manifest


@click.group()
def study() -> None:
    """Validate and freeze study manifests."""


@study.command()
@click.argument("manifest", type=click.Path(dir_okay=False))
def validate(manifest: str) -> None:
    """Check a manifest and every fixture it names.

    An adoption-baseline task manifest (JSON) given alone is checked for its structure; its
    package-name rules, fixtures and conditions are checked from the study file that names it.
    """
    path = Path(manifest).resolve()
    if path.suffix.lower() == ".json" and is_task_manifest(load_document(path)):
        tasks = load_task_manifest(path)
        click.echo(f"{path}: valid task manifest (structure): {_task_counts(tasks.tasks)}")
        click.echo("  the prompt rules need the package name, and a run needs fixtures and "
                   "conditions: give evalq a study file with [adoption] task_manifest = "
                   f'"{path.name}" (README: Adoption baseline manifests)')
        return
    loaded = load_manifest(manifest)
    state = "frozen" if verify_lock(loaded) else "not frozen yet"
    click.echo(f"{loaded.path}: valid: study '{loaded.id}', {len(loaded.fixtures)} fixtures × "
               f"{len(loaded.manifest.conditions)} conditions × {loaded.manifest.repetitions} "
               f"repetitions = {len(loaded.fixtures) * len(loaded.manifest.conditions) * loaded.manifest.repetitions} trials ({state})")
    if loaded.adoption is not None:
        click.echo(f"  task manifest {loaded.adoption.tasks.path}: "
                   f"{_task_counts(loaded.adoption.tasks.tasks)}; package "
                   f"'{loaded.adoption.table.package}'")


def _task_counts(tasks: list[dict]) -> str:
    """'4 tasks: free-selection 2, upgrade 1, ...; regression 3, unseen 1; 1 unsuitable'."""
    tracks = Counter(t["track"] for t in tasks)
    kinds = Counter(t["kind"] for t in tasks)
    unsuitable = sum(1 for t in tasks if t["suitable"] is False)
    return (f"{len(tasks)} tasks: " + ", ".join(f"{k} {n}" for k, n in sorted(tracks.items()))
            + "; " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
            + f"; {unsuitable} unsuitable")


@study.command("freeze")
@click.argument("manifest", type=click.Path(dir_okay=False))
@click.option("--force", is_flag=True, help="Replace a lock whose inputs changed.")
@click.option("--allow-dirty", is_flag=True,
              help="Freeze agent sources whose repository has uncommitted changes (the lock "
                   "records it).")
def freeze_cmd(manifest: str, force: bool, allow_dirty: bool) -> None:
    """Write the study lock (manifest, fixture and agent source digests) beside the manifest."""
    loaded = load_manifest(manifest)
    lock = freeze(loaded, force=force, allow_dirty=allow_dirty)
    click.echo(f"{loaded.lock_path}: frozen, lock {lock['lock_digest']}")
    for condition, entry in sorted((lock.get("agent_sources") or {}).items()):
        state = (lock.get("agent_source_states") or {}).get(condition) or {}
        commit = entry.get("commit") or state.get("head")
        where = f"commit {commit} ({entry['name']})" if entry.get("name") else \
            f"folder at commit {commit}" if commit else "folder outside git"
        dirty = f", {len(state['dirty'])} uncommitted change(s)" if state.get("dirty") else ""
        click.echo(f"  agent source of {condition}: {where}, {entry['digest']}{dirty}")
