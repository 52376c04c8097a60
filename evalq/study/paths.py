"""The files a study keeps beside its manifest: its lock, `NAME.lock.json` for `NAME.toml`."""

from __future__ import annotations

from pathlib import Path

LOCK_SUFFIX = ".lock.json"


def lock_path_for(manifest_path: Path) -> Path:
    return manifest_path.with_name(manifest_path.stem + LOCK_SUFFIX)
