"""What a hostile agent leaves behind is read by evalq from OUTSIDE its sandbox, as the worker
(root): its output files, its workspace (redaction, archive, diff) and its run folder (the
janitor's owner file). Inside a real sandbox (bwrap, docker) the agent makes those into
symlinks to host files or folders, FIFOs, hard links and huge sparse files; from outside, no
host file may be read through them, and nothing may block or run unbounded.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from conftest import copy_fixture  # noqa: E402
from evalq.fixtures.fixture import load_fixture, materialize  # noqa: E402
from evalq.models import Condition, Limits  # noqa: E402
from evalq.workers.agents.base import AgentContext  # noqa: E402
from evalq.workers.agents.command_template import CommandTemplate  # noqa: E402
from evalq.workers.profile import new_profile  # noqa: E402

BACKENDS = ["bwrap", "docker"]
#: a generous bound on anything evalq does after the agent: well-behaved, it takes a second
BOUND = 60.0


def bounded(func, *args):
    """func(*args) in a thread; fails the test when it has not returned within BOUND seconds
    (a worker blocked on a FIFO, or reading without end)."""
    out: dict = {}

    def call():
        try:
            out["value"] = func(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out["error"] = exc

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(BOUND)
    assert not thread.is_alive(), f"{getattr(func, '__name__', func)} still running after {BOUND}s"
    if "error" in out:
        raise out["error"]
    return out["value"]


def agent_run(tmp_path: Path, backend: str, code: str, *, credential_env: list | None = None,
              before=None, disk_mb: int | None = None, inodes: int | None = None):
    """Run `python3 -c code OUTPUT_DIR` as a `command` agent sealed in `backend`, through the
    adapter's own run (sandbox, parse, redaction); returns (ctx, result)."""
    fixture = load_fixture(copy_fixture("py-slugify-bugfix", tmp_path / "fx"))
    home = tmp_path / "home"
    profile = new_profile(home / "runs", disk_mb=disk_mb,
                          **({"inodes": inodes} if inodes is not None else {}))
    materialize(fixture, profile.workspace)
    if before is not None:
        before(profile)
    argv = ["/usr/bin/python3", "-c", code.replace("{", "{{").replace("}", "}}"),
            "{output_dir}"]
    settings = {"argv": argv, "credential_env": credential_env or []}
    condition = Condition(name="c", agent="command", settings=settings)
    ctx = AgentContext(fixture=fixture, condition=condition, profile=profile, prompt="fix it",
                       limits=Limits(wall_seconds=60), sandbox=backend, evalq_home=home)
    return ctx, bounded(CommandTemplate().run, ctx)


@pytest.fixture
def host_files(tmp_path):
    """A host folder the agent must never read from: a canary report and a usage file."""
    folder = tmp_path / "host-only"
    folder.mkdir()
    (folder / "report.txt").write_text("evalq-canary-host-report")
    (folder / "usage.json").write_text(json.dumps({"input_tokens": 4242}))
    return folder


LINK_FILES = """
import os, sys
out, host = sys.argv[1], {host!r}
os.makedirs(out, exist_ok=True)
os.symlink(host + "/report.txt", out + "/report.txt")
os.symlink(host + "/usage.json", out + "/usage.json")
"""

LINK_FOLDER = """
import os, shutil, sys
out, host = sys.argv[1], {host!r}
shutil.rmtree(out, ignore_errors=True)
os.symlink(host, out)
"""


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("attack", [LINK_FILES, LINK_FOLDER], ids=["file-links", "folder-link"])
def test_output_files_are_never_read_through_a_link(tmp_path, backend, attack, host_files):
    ctx, result = agent_run(tmp_path, backend, attack.replace("{host!r}", repr(str(host_files))))
    try:
        assert result.exit_code == 0, result.stderr
        assert result.final_report is None
        assert result.metrics.input_tokens is None
        assert b"evalq-canary-host-report" not in (result.transcript or b"")
        # the links were really there: the attack was made, evalq did not follow it
        out = ctx.profile.logs / "agent-output"
        assert (out / "report.txt").is_symlink() or out.is_symlink()
    finally:
        ctx.profile.cleanup()


FIFO_AND_SPARSE = """
import os, sys
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
os.mkfifo(out + "/usage.json")
with open(out + "/report.txt", "wb") as f:
    f.truncate(100 * 1024 * 1024)
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_output_files_that_block_or_are_huge_are_skipped(tmp_path, backend):
    ctx, result = agent_run(tmp_path, backend, FIFO_AND_SPARSE)  # bounded: a FIFO read hangs
    try:
        assert result.exit_code == 0, result.stderr
        assert result.metrics.input_tokens is None
        assert result.final_report is None  # 100 MB of a sparse file is no report
    finally:
        ctx.profile.cleanup()


HARD_LINKS = """
import os
os.makedirs("links")
with open("links/big.bin", "wb") as f:
    f.truncate(64 * 1024 * 1024)
for i in range(8):
    os.link("links/big.bin", f"links/hard-{i}")
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_hard_links_are_neither_archived_nor_read_for_the_diff(tmp_path, backend):
    from evalq.fixtures.archive import pack_workspace, unpack_workspace
    from evalq.workers.diff import workspace_diff

    ctx, result = agent_run(tmp_path, backend, HARD_LINKS)
    try:
        assert result.exit_code == 0, result.stderr
        assert (ctx.workspace / "links" / "hard-7").stat().st_nlink == 9
        dropped = unpack_workspace(pack_workspace(ctx.workspace), tmp_path / "unpacked")
        assert sum("hard link dropped" in d for d in dropped) == 9
        diff = bounded(workspace_diff, ctx.fixture.workspace_dir, ctx.workspace)
        assert "links/" not in diff  # what the archive does not carry, the diff does not read
    finally:
        ctx.profile.cleanup()


SPARSE_TREE = """
import os
for i in range(3):
    with open(f"sparse-{i}.bin", "wb") as f:
        f.truncate(100 * 1024 * 1024)
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_redaction_stops_at_the_workspace_limit(tmp_path, backend, monkeypatch):
    """With a credential to mask, the adapter rewrites the workspace before it is packed;
    3 x 100 MB of sparse files cost the agent no disk and must not be read in full. The run
    ends marked too large (the runner then stores none of the workspace and records the
    attempt incorrect), not with an exception that would make it evalq's failure."""
    from evalq.workers.agents.base import TOO_LARGE

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-left-files-0123456789")
    _, result = agent_run(tmp_path, backend, SPARSE_TREE, credential_env=["ANTHROPIC_API_KEY"])
    assert result.extra[TOO_LARGE].startswith("workspace over")


#: the agent's run folder is its profile root, owner file included (output_dir = root/logs/…)
OWNER_FIFO = """
import os, sys
owner = os.path.join(os.path.dirname(os.path.dirname(sys.argv[1])), ".evalq-owner.json")
os.unlink(owner)
os.mkfifo(owner)
"""

OWNER_DEAD_DEEP = """
import json, os, sys
root = os.path.dirname(os.path.dirname(sys.argv[1]))
with open(os.path.join(root, ".evalq-owner.json"), "w") as f:  # pid 1, another start: gone
    json.dump({"host": HOST, "pid": 1, "start": "0"}, f)
os.chdir(root)
for _ in range(3000):
    os.mkdir("d")
    os.chdir("d")
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_run_folder_sweep_survives_what_the_agent_made_of_its_folder(tmp_path, backend):
    """The janitor (every worker, every 5 minutes) reads each run folder's owner file: a FIFO
    there must not block it; a folder it may remove is removed however deep the tree."""
    import socket

    from evalq.ops.run_folders import record_owner, sweep_run_folders

    ctx, result = agent_run(tmp_path / "fifo", backend, OWNER_FIFO, before=lambda p: record_owner(p.root))
    runs = ctx.profile.root.parent
    try:
        assert result.exit_code == 0, result.stderr
        assert bounded(sweep_run_folders, runs) == 0  # no owner to judge by: left alone
        assert ctx.profile.root.exists()
    finally:
        ctx.profile.cleanup()
    code = OWNER_DEAD_DEEP.replace("HOST", repr(socket.gethostname()))
    ctx, result = agent_run(tmp_path / "deep", backend, code, before=lambda p: record_owner(p.root),
                            disk_mb=16)
    assert result.exit_code == 0, result.stderr
    assert ctx.profile.capped and os.path.ismount(ctx.profile.root)  # as the runner makes it
    assert bounded(sweep_run_folders, ctx.profile.root.parent) == 1
    assert not ctx.profile.root.exists()


FILL_THE_DISK = """
import os
written, error = 0, None
chunk = os.urandom(1024 * 1024)
try:
    for i in range(200):  # 200 MB in 1 MB files: no per-file limit is hit
        with open(f"fill-{i}.bin", "wb") as f:
            f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        written += len(chunk)
except OSError as exc:
    error = exc.strerror
print("WROTE", written, error)
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_profile_holds_no_more_than_its_disk_cap(tmp_path, backend):
    """File after file, each under the per-file limit, stops at the profile's total cap
    (a tmpfs of its own), never at the host's full disk."""
    ctx, result = agent_run(tmp_path, backend, FILL_THE_DISK, disk_mb=32)
    try:
        assert ctx.profile.capped
        line = result.stdout.decode().split("WROTE", 1)[1].split()
        written = int(line[0])
        assert written <= 32 * 1024 * 1024 and "No space" in " ".join(line[1:]), line
        on_host = sum(p.stat().st_size for p in ctx.workspace.glob("fill-*"))
        assert written <= on_host <= 32 * 1024 * 1024  # (the last file, cut short, too)
    finally:
        ctx.profile.cleanup()
    assert not ctx.profile.root.exists()


SWAP_WORKSPACE = """
import os
workspace = os.getcwd()
os.chdir("/")
os.rename(workspace, workspace + ".mine")
os.symlink(HOST, workspace)
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_workspace_swapped_for_a_link_is_not_collected_through_it(tmp_path, backend,
                                                                    monkeypatch):
    """The workspace is a folder in the agent's read-write profile: it can put a symlink to
    any host folder in its place (the fixture's reference solution, the folder of the
    secrets file). What evalq then archives, diffs, grades and redacts in place must not be
    that folder."""
    from evalq.fixtures.archive import pack_workspace, unpack_workspace

    key = "sk-ant-swapped-workspace-0123456789"
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    host = tmp_path / "host-only"
    host.mkdir()
    (host / "answer.py").write_text("evalq-canary-reference-solution\n")
    (host / "secrets.env").write_text(f"ANTHROPIC_API_KEY={key}\n")
    code = SWAP_WORKSPACE.replace("HOST", repr(str(host)))
    ctx, result = agent_run(tmp_path / "run", backend, code,
                            credential_env=["ANTHROPIC_API_KEY"])
    try:
        assert result.exit_code == 0, result.stderr
        assert (ctx.profile.root / "workspace.mine").is_dir()  # the swap was made
        assert ctx.workspace.is_dir() and not ctx.workspace.is_symlink()
        unpacked = tmp_path / "unpacked"
        unpack_workspace(pack_workspace(ctx.workspace), unpacked)
        assert list(unpacked.iterdir()) == []  # the agent left no workspace of its own
        # and the host folder was neither collected nor rewritten by the redaction
        assert (host / "secrets.env").read_text() == f"ANTHROPIC_API_KEY={key}\n"
        assert sorted(p.name for p in host.iterdir()) == ["answer.py", "secrets.env"]
    finally:
        ctx.profile.cleanup()


MANY_FILES = """
import os
made, error = 0, None
try:
    for i in range(20000):
        open(f"empty-{i}", "w").close()
        made += 1
except OSError as exc:
    error = exc.strerror
print("MADE", made, error)
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_profile_holds_no_more_files_than_its_inode_cap(tmp_path, backend):
    """Empty files take no bytes: the count of files is capped apart (kernel memory)."""
    ctx, result = agent_run(tmp_path, backend, MANY_FILES, disk_mb=32, inodes=5000)
    try:
        made, *error = result.stdout.decode().split("MADE", 1)[1].split(maxsplit=1)
        assert int(made) < 5000 and "No space" in error[0], (made, error)
    finally:
        ctx.profile.cleanup()
