"""The content-addressed artifact store: same bytes once, and never serves corruption."""

from __future__ import annotations

import pytest

from evalq.artifacts import ArtifactStore, open_store
from evalq.errors import InfrastructureError


def test_put_is_content_addressed_and_get_refuses_corruption(tmp_path):
    store = ArtifactStore(tmp_path)
    ref = store.put(b"final workspace")
    assert store.put(b"final workspace") == ref and store.get(ref) == b"final workspace"
    blob = tmp_path / "sha256" / ref[7:9] / ref[7:]
    blob.write_bytes(b"tampered")
    with pytest.raises(InfrastructureError, match="corrupt"):
        store.get(ref)
    with pytest.raises(InfrastructureError, match="not an artifact reference"):
        store.get("sha256:short")


def test_file_url_and_missing_artifact(tmp_path):
    store = open_store(f"file://{tmp_path}")
    assert isinstance(store, ArtifactStore)
    with pytest.raises(InfrastructureError, match="missing"):
        store.get("sha256:" + "0" * 64)
