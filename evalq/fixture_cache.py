"""Fixtures travel through the artifact store by digest; each worker keeps a verified local copy."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from evalq.artifacts import ArtifactStore
from evalq.errors import InfrastructureError, UserError
from evalq.fixtures import Fixture, load_fixture
from evalq.graders.workspace import pack_workspace, unpack_workspace


def publish_fixture(store: ArtifactStore, fixture: Fixture) -> str:
    """Put a fixture's whole directory in the store; returns its reference."""
    return store.put(pack_workspace(fixture.path))


def cached_fixture(store: ArtifactStore, cache_dir: Path, ref: str, digest: str) -> Fixture:
    """The fixture behind `ref`, unpacked once per machine and re-checked against `digest`."""
    target = cache_dir / digest.replace(":", "-")
    if not target.exists():
        cache_dir.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=cache_dir, prefix=".staging-"))
        try:
            unpack_workspace(store.get(ref), staging)
            os.replace(staging, target)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
            if not target.exists():
                raise
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
    try:
        fixture = load_fixture(target)
    except UserError as exc:
        raise InfrastructureError(f"cached fixture {digest} is damaged: {exc}") from None
    if fixture.digest != digest:
        raise InfrastructureError(f"fixture reference {ref} holds {fixture.digest}, not {digest}")
    return fixture
