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
def freeze_cmd(manifest: str, force: bool) -> None:
    """Write the study lock (manifest and fixture digests) beside the manifest."""
    loaded = load_manifest(manifest)
    lock = freeze(loaded, force=force)
    click.echo(f"{loaded.lock_path}: frozen, lock {lock['lock_digest']}")
