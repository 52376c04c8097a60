"""A condition's agent source on a worker: unpacked once from the artifact store into a cache,
and checked against the lock's digest before every run that mounts it.

The sealed sandboxes mount it read-only (at AGENT_DIR), so no run changes it; the check is
for the rest (a damaged cache, an unsealed `none` run that wrote into it): a tree that no
longer matches is replaced by a fresh copy before the run, never mounted as it is.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from pathlib import Path

from evalq.digest import tree_digest
from evalq.errors import EvalqError, InfrastructureError
from evalq.fixtures.archive import unpack_workspace


def _intact(folder: Path, digest: str) -> bool:
    try:
        return folder.is_dir() and tree_digest(folder) == digest
    except (OSError, EvalqError):  # unreadable, or a link or special file put there
        return False


def _readable(folder: Path) -> None:
    """Folders 0755 whatever the umask: the sandboxes' agent user (65534) must read them."""
    os.chmod(folder, 0o755)
    for dirpath, dirnames, _ in os.walk(folder):
        for name in dirnames:
            os.chmod(Path(dirpath) / name, 0o755)


def checked_source(store, entry: dict, digest: str, cache_dir: Path) -> Path:
    """The folder holding the source `entry` ({digest, ref}) published, matching `digest`
    (the lock's) as of now."""
    if entry.get("digest") != digest:
        raise InfrastructureError(f"the published agent source {entry.get('digest')} is not "
                                  f"the locked {digest}; run `evalq run` again to publish it")
    target = cache_dir / digest.replace(":", "-")
    if _intact(target, digest):
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=cache_dir, prefix=".staging-"))
    try:
        dropped = unpack_workspace(store.get(entry["ref"]), staging)
        if dropped or not _intact(staging, digest):
            raise InfrastructureError(f"agent source {entry['ref']} does not unpack to {digest}")
        _readable(staging)
        if target.exists() and _intact(target, digest):  # another run's copy, made meanwhile
            return target
        if target.exists():  # damaged: set aside, then removed
            aside = cache_dir / f".damaged-{uuid.uuid4().hex[:8]}"
            os.replace(target, aside)
            shutil.rmtree(aside, ignore_errors=True)
        try:
            os.replace(staging, target)
        except OSError:  # another run put its copy there first
            if not _intact(target, digest):
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
