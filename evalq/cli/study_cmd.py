"""`evalq study validate|freeze`."""

from __future__ import annotations

import click

from evalq.study.lock import freeze, verify_lock
from evalq.study.manifest import load_manifest


@click.group()
def study() -> None:
    """Validate and freeze study manifests."""


@study.command()
@click.argument("manifest", type=click.Path(dir_okay=False))
def validate(manifest: str) -> None:
    """Check a manifest and every fixture it names."""
    loaded = load_manifest(manifest)
    state = "frozen" if verify_lock(loaded) else "not frozen yet"
    click.echo(f"{loaded.path}: valid: study '{loaded.id}', {len(loaded.fixtures)} fixtures × "
               f"{len(loaded.manifest.conditions)} conditions × {loaded.manifest.repetitions} "
               f"repetitions = {len(loaded.fixtures) * len(loaded.manifest.conditions) * loaded.manifest.repetitions} trials ({state})")


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
