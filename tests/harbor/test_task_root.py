"""How a task's environment tree becomes an agent sandbox's root: bound read-only around the
mount targets, closed folders on a target's way found, links resolved inside the tree, the
environment's PATH first; and a tree lacking what the sandbox needs refused with its reason."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from evalq.errors import InfrastructureError
from evalq.graders.sandbox.base import SandboxLimits
from evalq.workers.sandbox.base import AgentJob
from evalq.workers.sandbox.bwrap import BwrapAgentSandbox, bwrap_as_root
from evalq.workers.sandbox.task_root import (TaskRoot, agent_env, closed_folders, in_tree,
                                             tree_binds)


def _tree(root: Path) -> Path:
    for folder in ("usr/bin", "etc", "root", "app", "proc", "tmp", "opt/tool"):
        (root / folder).mkdir(parents=True)
    (root / "usr/bin/python3.11").write_text("")
    (root / "usr/bin/python3").symlink_to("python3.11")
    (root / "etc/passwd").write_text("root:x:0:0::/root:/bin/sh\n")
    (root / "etc/os-release").write_text("ID=test\n")
    (root / "bin").symlink_to("usr/bin")
    (root / "root/.profile").write_text("")
    (root / "root").chmod(0o700)
    return root


def _pairs(args: list[str]) -> list[tuple[str, ...]]:
    out, i = [], 0
    while i < len(args):
        if args[i] == "--perms":
            out.append(("--perms", args[i + 1], args[i + 2], args[i + 3]))
            i += 4
        else:
            out.append((args[i], args[i + 1], args[i + 2]))
            i += 3
    return out


def test_tree_is_bound_around_the_targets(tmp_path):
    tree = _tree(tmp_path / "tree")
    binds = _pairs(tree_binds(tree, ["/etc/passwd", "/app", "/root/.pyenv/v", "/tmp/run"]))
    assert ("--ro-bind", str(tree / "usr"), "/usr") in binds  # whole: nothing inside it
    assert ("--symlink", "usr/bin", "/bin") in binds
    assert ("--perms", "0755", "--dir", "/etc") in binds  # split: a target inside it
    assert ("--ro-bind", str(tree / "etc/os-release"), "/etc/os-release") in binds
    assert ("--perms", "0755", "--dir", "/root") in binds  # closed: an empty stand-in
    assert not any(b[-1] == "/root/.profile" for b in binds)
    targets = {b[-1] for b in binds}
    assert "/etc/passwd" not in targets and "/app" not in targets  # left to their mounts
    assert "/proc" not in targets and "/tmp" not in targets  # made fresh


def test_closed_folders_on_the_way_to_a_target(tmp_path):
    tree = _tree(tmp_path / "tree")
    assert closed_folders(tree, ["/root/.pyenv/v", "/opt/tool/x", "/work/run"]) == ["/root"]
    assert closed_folders(None, ["/root/x"]) == []


def test_links_resolve_inside_the_tree(tmp_path):
    tree = _tree(tmp_path / "tree")
    (tree / "usr/bin/abs").symlink_to("/usr/bin/python3")  # absolute: the tree's, not the host's
    assert in_tree(tree, "/usr/bin/python3") and in_tree(tree, "/bin/python3")
    assert in_tree(tree, "/usr/bin/abs")
    assert not in_tree(tree, "/usr/bin/setpriv")
    (tree / "usr/bin/loop").symlink_to("loop")
    assert not in_tree(tree, "/usr/bin/loop")


def test_the_environments_path_comes_first():
    root = TaskRoot(image="i", digest="d", workdir="/app",
                    env={"PATH": "/opt/tool/bin:/usr/bin", "TOOL_HOME": "/opt/tool"})
    env = agent_env(root, {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/run/home"})
    assert env["PATH"] == "/opt/tool/bin:/usr/bin:/usr/local/bin:/bin"
    assert env["TOOL_HOME"] == "/opt/tool" and env["HOME"] == "/run/home"


@pytest.mark.skipif(not bwrap_as_root(), reason="the agent user is made by setpriv as root")
def test_an_environment_without_setpriv_is_refused_with_its_reason(tmp_path):
    tree = _tree(tmp_path / "tree")
    root = TaskRoot(image="evalq-grader-harbor-x:local", digest="d", workdir="/app", tree=tree)
    (tmp_path / "p" / "workspace").mkdir(parents=True)
    job = AgentJob(argv=["/bin/true"], env={}, workspace=tmp_path / "p" / "workspace",
                   profile_root=tmp_path / "p",
                   limits=SandboxLimits(timeout_seconds=10, memory_mb=256, pids=32, cpus=1,
                                        output_limit_bytes=1000, disk_mb=16))
    with pytest.raises(InfrastructureError, match="has no /usr/bin/setpriv"):
        BwrapAgentSandbox(root=root).run(job)
    assert os.listdir(tmp_path / "p" / "workspace") == []
