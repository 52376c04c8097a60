"""Small pieces of the distributed story: the object-storage artifact store, environment flags."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace

import pytest

from evalq.artifacts import ArtifactStore, FsspecArtifactStore, open_store
from evalq.errors import InfrastructureError
from evalq.ops.environments import describe, differing_fields, study_environment_flag


def test_memory_url_gives_an_fsspec_store_with_the_same_addresses(tmp_path):
    store = open_store("memory://evalq-test-artifacts")
    assert isinstance(store, FsspecArtifactStore)
    data = b"final workspace bytes"
    ref = store.put(data)
    assert ref == "sha256:" + hashlib.sha256(data).hexdigest()
    assert store.put(data) == ref and store.exists(ref) and store.get(ref) == data
    assert ref == ArtifactStore(tmp_path).put(data)  # same reference as the local store
    store.fs.pipe_file(store._path(ref), b"tampered")
    with pytest.raises(InfrastructureError, match="corrupt"):
        store.get(ref)
    missing = "sha256:" + "0" * 64
    with pytest.raises(InfrastructureError, match="missing"):
        store.get(missing)
    assert isinstance(open_store(str(tmp_path)), ArtifactStore)
    assert isinstance(open_store(f"file://{tmp_path}"), ArtifactStore)


def test_differing_worker_environments_are_named():
    a = {"os": "Linux 6.1", "python": "3.11.2", "agents": {"claude": "1.0", "codex": None}}
    b = {"os": "Linux 6.1", "python": "3.12.1", "agents": {"claude": "1.1", "codex": None}}
    assert differing_fields([a, a, None]) == {}
    assert differing_fields([a, b]) == {"agents.claude": ["1.0", "1.1"],
                                        "python": ["3.11.2", "3.12.1"]}
    rows = [SimpleNamespace(worker_env=a, worker_host="host-a"),
            SimpleNamespace(worker_env=b, worker_host="host-b"),
            SimpleNamespace(worker_env=None, worker_host=None)]
    flag = study_environment_flag(rows)
    assert flag["hosts_by_value"]["python"] == {'"3.11.2"': ["host-a"], '"3.12.1"': ["host-b"]}
    assert describe(flag) == ("worker environments differ in agents.claude (1.0, 1.1); "
                              "python (3.11.2, 3.12.1)")
    assert study_environment_flag(rows[:1]) is None and describe(None) is None
