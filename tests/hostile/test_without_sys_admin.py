"""Both bubblewrap sandboxes when evalq runs as root without CAP_SYS_ADMIN, as in a Docker
container: agents run sealed as the host's uid 65534 (bwrap itself runs as that user and makes
a user namespace), grading grades as with the capability, and what cannot be had without it
(a tmpfs disk cap; cgroups where the tree is read-only) is said, not silently missing.

The hostile agent's attacks under the same condition are in
tests/agent_sandbox/test_hostile_agent.py and test_other_ways_out.py (NO_SYS_ADMIN).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "agents"))

from conftest import FIXTURES, PY_FIXTURES, copy_fixture, run_cli, write_study  # noqa: E402
from no_sys_admin import command, let_agent_pass, run_agent_job, run_grading  # noqa: E402
from test_agents_support import attempts  # noqa: E402
from evalq.errors import InfrastructureError  # noqa: E402
from evalq.graders.sandbox import SandboxLimits  # noqa: E402
from evalq.workers.sandbox.paths import evalq_python_paths  # noqa: E402

NO_DISK_CAP = "no total disk cap (mounting a tmpfs needs CAP_SYS_ADMIN"
CGROUPS = pytest.mark.parametrize("cgroups", [True, False], ids=["cgroups", "no-cgroups"])


@pytest.fixture
def open_tmp(tmp_path, tmp_path_factory) -> Path:
    """tmp_path, searchable by the agent user, as a deployment's EVALQ_HOME must be."""
    let_agent_pass(tmp_path, tmp_path_factory.getbasetemp())
    return tmp_path


@CGROUPS
def test_a_scripted_study_runs_sealed_and_is_graded_as_scripted(open_tmp, cgroups):
    fixtures = open_tmp / "fixtures"
    fixtures.mkdir()
    for name in PY_FIXTURES:
        copy_fixture(name, fixtures)
    manifest = write_study(open_tmp / "study", fixtures, repetitions=1)
    home = open_tmp / "home"
    proc = run_cli(["run", str(manifest)], {"EVALQ_HOME": str(home), "EVALQ_SANDBOX": "bwrap",
                                            "EVALQ_AGENT_SANDBOX": "bwrap"}, timeout=600,
                   wrap=lambda argv: command(argv, [*evalq_python_paths(), home], cgroups))
    assert proc.returncode == 0, proc.stderr[-4000:] + proc.stdout[-2000:]
    rows = attempts(home)
    db = sqlite3.connect(home / "evalq.db")
    conditions = dict(db.execute("select id, condition from trials"))
    db.close()
    assert sorted((conditions[r["trial_id"]], r["outcome"]) for r in rows) == \
        [("bad", "incorrect")] * 2 + [("good", "correct")] * 2, [r["reason"] for r in rows]
    assert {r["worker_env"]["agent_sandbox"] for r in rows} == {"bwrap"}
    # grading could not cap its scratch either, and each grade says so
    assert all(NO_DISK_CAP in (r["reason"] or "") for r in rows), [r["reason"] for r in rows]
    report = json.loads((home / "reports" / "t" / "report.json").read_text())
    assert report["agent_sandbox"]["sealed"] is True
    assert report["agent_sandbox"]["backends"] == {"bwrap": 4}
    log = "".join(p.read_text() for p in (home / "logs").glob("*.log"))
    runs = [line for line in log.splitlines() if f"profile {home / 'runs'}" in line]
    assert len(runs) == 4 and all(f"has {NO_DISK_CAP}" in line for line in runs), log[-3000:]
    assert ("agent sandbox: no writable cgroup" in log) is not cgroups, log[-3000:]


def test_the_fixture_self_check_grades_each_reference_as_its_verdict(open_tmp):
    """`evalq fixtures check` (initial, correct and incorrect references, each graded) for a
    Python and a make fixture, without a writable cgroup tree either, as in compose."""
    for name in ("py-slugify-bugfix", "c-vsort-bugfix"):
        shutil.copytree(FIXTURES / name, open_tmp / name)
    proc = run_cli(["fixtures", "check", str(open_tmp / "py-slugify-bugfix"),
                    str(open_tmp / "c-vsort-bugfix"), "--json"], {"EVALQ_SANDBOX": "bwrap"},
                   wrap=lambda argv: command(argv, cgroups=False))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = json.loads(proc.stdout)
    assert [(r["fixture"], r["initial"], r["correct"], r["incorrect"], r["ok"]) for r in rows] \
        == [(n, "incorrect", "correct", "incorrect", True)
            for n in ("py-slugify-bugfix", "c-vsort-bugfix")]
    assert all(NO_DISK_CAP in r["reasons"]["correct"] for r in rows), rows


PROBE = ("id -u; hostname; grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs|Seccomp):' "
         "/proc/self/status; unshare -U true 2>/dev/null || echo unshare-refused; "
         "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '; "
         "cat /proc/1/cmdline | tr '\\0' ' '; echo")


@CGROUPS
def test_graded_code_is_uid_65534_with_nothing(open_tmp, cgroups):
    """The grading sandbox's guarantees hold as with CAP_SYS_ADMIN: uid 65534, no capability
    (not even bounded), no_new_privs, the seccomp filter, loopback only, its own pid 1."""
    workspace, report = open_tmp / "ws", open_tmp / "rep"
    workspace.mkdir()
    report.mkdir()
    done = run_grading(["sh", "-c", PROBE], workspace, report,
                       SandboxLimits(timeout_seconds=30), {"PATH": "/usr/bin:/bin",
                                                           "HOME": "/tmp"}, cgroups)
    assert done["exit_code"] == 0, done["stderr"]
    lines = done["stdout"].splitlines()
    assert lines[:2] == ["65534", "evalq-sandbox"], done["stdout"]
    fields = dict(line.split(":\t") for line in lines[2:7])
    assert fields == {"CapPrm": "0000000000000000", "CapEff": "0000000000000000",
                      "CapBnd": "0000000000000000", "NoNewPrivs": "1", "Seccomp": "2"}, fields
    assert lines[7:9] == ["unshare-refused", "lo"], done["stdout"]
    assert not lines[9].startswith("sh -c"), done["stdout"]  # pid 1 is bwrap's init
    assert ("no writable cgroup: memory and process limits use rlimits" in done["notes"]) \
        is not cgroups, done["notes"]


@CGROUPS
def test_an_agent_past_its_wall_time_is_stopped_with_all_it_started(tmp_path, cgroups):
    """The wall-time stop reaches everything the agent started (a `setsid` child included)
    also when bwrap runs as the agent user, with or without a cgroup."""
    from evalq.workers.profile import new_profile
    from evalq.workers.sandbox import AgentJob

    token = f"evalq-nocap-wall-{uuid.uuid4().hex[:12]}"
    profile = new_profile(tmp_path / "runs")
    profile.workspace.mkdir()
    let_agent_pass(profile.root.parent, tmp_path)
    script = f"setsid sh -c 'sleep 600; : {token}' & sleep 600; : {token}"
    try:
        done = run_agent_job(AgentJob(argv=["/bin/sh", "-c", script], env=profile.env,
                                      workspace=profile.workspace, profile_root=profile.root,
                                      limits=SandboxLimits(timeout_seconds=3), label="wall"),
                             cgroups)
    finally:
        profile.cleanup()
    assert done.timed_out, done
    left = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _has(p, token)]
    assert left == [], left


def _has(proc: Path, token: str) -> bool:
    try:
        return token.encode() in (proc / "cmdline").read_bytes()
    except OSError:
        return False


def test_a_folder_bwrap_cannot_reach_is_refused_with_the_fix(open_tmp):
    """Without CAP_SYS_ADMIN, bwrap (uid 65534) cannot bind what lies below a folder others
    cannot search: the run fails as an infrastructure failure that names the path and the fix."""
    from evalq.workers.profile import new_profile
    from evalq.workers.sandbox import AgentJob

    install = open_tmp / "closed" / "install"
    install.mkdir(parents=True)
    (open_tmp / "closed").chmod(0o700)
    profile = new_profile(open_tmp / "runs")
    profile.workspace.mkdir()
    try:
        with pytest.raises(InfrastructureError) as refused:
            run_agent_job(AgentJob(argv=["/bin/true"], env=profile.env,
                                   workspace=profile.workspace, profile_root=profile.root,
                                   limits=SandboxLimits(timeout_seconds=30),
                                   readonly=[install], label="closed"),
                          shown=[profile.root])
    finally:
        profile.cleanup()
    message = str(refused.value)
    assert str(install) in message and "chmod o+x" in message, message
    assert "\n" not in message, message
