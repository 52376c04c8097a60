"""Finding an agent's executable skips version managers' shims on PATH (they fail sealed)."""

from __future__ import annotations

import os

from evalq.workers.agents.locate import find_executable


def _tool(folder, name="mytool"):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return str(path)


def test_a_shim_first_on_path_gives_way_to_the_real_executable(tmp_path, monkeypatch):
    _tool(tmp_path / "pyenv" / "shims")
    real = _tool(tmp_path / "usr" / "bin")
    monkeypatch.delenv("EVALQ_AGENT_PATH", raising=False)
    monkeypatch.setenv("PATH", os.pathsep.join([str(tmp_path / "pyenv" / "shims"),
                                                str(tmp_path / "usr" / "bin")]))
    assert find_executable("mytool") == real


def test_only_a_shim_means_not_installed(tmp_path, monkeypatch):
    _tool(tmp_path / "asdf" / "shims")
    monkeypatch.delenv("EVALQ_AGENT_PATH", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "asdf" / "shims/"))
    assert find_executable("mytool") is None


def test_a_shims_folder_named_in_evalq_agent_path_is_kept(tmp_path, monkeypatch):
    shim = _tool(tmp_path / "mine" / "shims")
    _tool(tmp_path / "usr" / "bin")
    monkeypatch.setenv("EVALQ_AGENT_PATH", str(tmp_path / "mine" / "shims"))
    monkeypatch.setenv("PATH", str(tmp_path / "usr" / "bin"))
    assert find_executable("mytool") == shim
