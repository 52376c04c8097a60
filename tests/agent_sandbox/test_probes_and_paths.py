"""Version checks run sealed in a throwaway profile with no credential (issue 13, part 3), and
the read-only paths an adapter declares are its own install, never a folder holding the host's
answers."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agents"))

from test_agents_support import agent_path  # noqa: E402,F401
from evalq.errors import InfrastructureError  # noqa: E402
from evalq.workers.agents.base import AgentAdapter  # noqa: E402
from evalq.workers.sandbox.paths import (evalq_python_paths, install_paths,  # noqa: E402
                                         protected_folders, refuse_exposing)

FAKE = """#!/bin/sh
mkdir -p "$HOME/.fake-agent" && echo cache > "$HOME/.fake-agent/state"
echo "fake-agent 1.2.3 home=$HOME key=${ANTHROPIC_API_KEY:-none} canary=$(cat {canary} 2>/dev/null || echo unseen)"
"""


class FakeAgent(AgentAdapter):
    name = "fake-probe"
    executable = "fake-probe-agent"
    credential_env = ("ANTHROPIC_API_KEY",)

    def command(self, ctx):  # pragma: no cover - only probed here
        raise NotImplementedError

    def parse(self, ctx, proc):  # pragma: no cover
        raise NotImplementedError


@pytest.mark.parametrize("sandbox", ["bwrap", "docker"])
def test_version_check_runs_sealed_with_no_credential(tmp_path, monkeypatch, sandbox):
    worker_home = tmp_path / "worker-home"
    worker_home.mkdir()
    canary = worker_home / ".canary"
    canary.write_text("evalq-canary-probe")
    tools = tmp_path / "tools"
    tools.mkdir()
    fake = tools / "fake-probe-agent"
    fake.write_text(FAKE.replace("{canary}", str(canary)))
    fake.chmod(0o755)
    monkeypatch.setenv("HOME", str(worker_home))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-worker-key-0123456789")
    monkeypatch.setenv("EVALQ_AGENT_PATH", str(tools))
    line = FakeAgent.version(sandbox)
    assert line is not None and line.startswith("fake-agent 1.2.3 "), line
    fields = dict(part.split("=", 1) for part in line.split()[2:])
    assert fields["key"] == "none" and fields["canary"] == "unseen", fields
    assert fields["home"] != str(worker_home) and not Path(fields["home"]).exists()
    assert sorted(p.name for p in worker_home.iterdir()) == [".canary"]  # nothing written


def test_install_paths_of_the_real_agents(agent_path):  # noqa: F811
    folders = agent_path.split(os.pathsep)
    claude = Path(folders[0]) / "claude"
    mini = Path(folders[1]) / "mini"
    npm_prefix = Path(folders[0]).parents[1]
    assert install_paths(str(claude)) == [npm_prefix]  # the folder above node_modules
    venv = Path(folders[1]).parent
    paths = install_paths(str(mini))
    assert paths[0] == venv and len(paths) == 2  # the virtualenv and its interpreter's prefix
    assert (paths[1] / "bin").is_dir() and not (paths[1] / "pyvenv.cfg").exists()


def test_evalq_code_sees_the_package_folder_never_the_checkout(tmp_path):
    import evalq

    package = Path(evalq.__file__).resolve().parent
    paths = evalq_python_paths()
    assert package in paths and package.parent not in paths
    assert not any((p / "fixtures").is_dir() and (p / "evalq").is_dir() for p in paths)


def test_a_path_that_would_expose_a_protected_folder_is_refused(tmp_path):
    home = tmp_path / "evalq-home"
    (home / "cache").mkdir(parents=True)
    protected = protected_folders(home)
    for bad in (Path("/"), tmp_path, home):
        with pytest.raises(InfrastructureError, match="would expose"):
            refuse_exposing([bad], protected)
    overlay = home / "cache" / "fx" / "solutions" / "correct"
    with pytest.raises(InfrastructureError, match="inside EVALQ_HOME"):
        refuse_exposing([home / "cache"], protected, home)
    with pytest.raises(InfrastructureError, match="inside EVALQ_HOME"):
        refuse_exposing([overlay], protected, home)
    refuse_exposing([overlay, tmp_path / "elsewhere"], protected, home, allowed=[overlay])
