"""bubblewrap backend specifics: CPU quota, namespaces, the read-only system view."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from evalq.graders.sandbox import SandboxLimits, get_sandbox
from evalq.graders.sandbox.toolchain import rootfs_dir

ENV = {"PATH": "/usr/bin:/bin", "HOME": "/tmp"}


def _run(script: str, **limits):
    with tempfile.TemporaryDirectory() as tmp:
        ws, rep = Path(tmp) / "ws", Path(tmp) / "rep"
        ws.mkdir()
        rep.mkdir()
        return get_sandbox("bwrap").run(["sh", "-c", script], workspace=ws, report_dir=rep,
                                        limits=SandboxLimits(timeout_seconds=20, **limits),
                                        env=dict(ENV))


def test_cpu_quota_caps_a_busy_loop():
    result = _run("python3 -c 'import time\nt=time.process_time();e=time.time()+2\n"
                  "while time.time()<e: pass\nprint(time.process_time()-t)'", cpus=0.25)
    used = float(result.stdout.strip())
    assert 0 < used <= 2 * 0.25 * 1.5, f"{used:.2f} s of CPU in 2 s of wall time at 0.25 CPU"


def test_namespaces_and_identity():
    result = _run("id -u; hostname; ls /; cat /proc/1/cmdline | tr '\\0' ' '; echo; "
                  "ls /sys/class/net 2>/dev/null || cat /proc/net/dev")
    lines = result.stdout.splitlines()
    assert lines[0] == "65534"
    assert lines[1] == "evalq-sandbox"
    assert "eth0" not in result.stdout and "ens" not in result.stdout


def test_root_is_the_toolchain_tree_not_the_host():
    """`/` is the python image's rootfs tree: the host's own folders are not there."""
    root = rootfs_dir() / "python"
    result = _run("ls -a /")
    assert result.toolchain.root == root
    top = result.stdout.splitlines()
    assert sorted(top) == sorted([".", "..", *os.listdir(root)])
    host_only = sorted(set(os.listdir("/")) - set(os.listdir(root)))
    assert host_only and not set(host_only) & set(top), host_only


def test_system_is_read_only_and_tmp_is_capped():
    """/tmp is a tmpfs of the disk allowance, as in Docker (test_backends_agree.py)."""
    result = _run("touch /usr/x 2>/dev/null && echo wrote-usr; "
                  "touch /etc/x 2>/dev/null && echo wrote-etc; "
                  "dd if=/dev/zero of=/tmp/big bs=1M count=100 2>/dev/null || echo tmp-full; "
                  "echo ok > /workspace/w && cat /workspace/w", disk_mb=64)
    assert "wrote-usr" not in result.stdout and "wrote-etc" not in result.stdout
    assert "tmp-full" in result.stdout
    assert result.stdout.strip().endswith("ok")


def test_no_capabilities_and_no_new_privileges():
    result = _run("grep -E 'NoNewPrivs|CapEff|CapPrm' /proc/self/status")
    fields = dict(line.split(":\t") for line in result.stdout.strip().splitlines())
    assert fields == {"CapPrm": "0000000000000000", "CapEff": "0000000000000000",
                      "NoNewPrivs": "1"}


def test_seccomp_filter_refuses_namespace_and_mount_calls():
    result = _run("grep Seccomp: /proc/self/status; unshare -U true || echo unshare-refused; "
                  "python3 -c 'import ctypes; print(ctypes.CDLL(None).mount(b\"x\", b\"/tmp\", "
                  "b\"tmpfs\", 0, None))'")
    assert "Seccomp:\t2" in result.stdout
    assert "unshare-refused" in result.stdout and "Operation not permitted" in result.stderr
    assert result.stdout.strip().endswith("-1")
    # the filter goes to bwrap through an in-memory file: nothing is left in the temp dir
    assert not list(Path(tempfile.gettempdir()).glob("evalq-seccomp-*"))


def test_code_that_imitates_a_bwrap_refusal_is_graded_as_itself():
    """Graded code printing bwrap's words and exiting 1 is an ordinary failed run, not a
    refused sandbox (which would be a grading_failure): bwrap reported its child's exit."""
    result = _run("echo 'bwrap: Creating new namespace failed' >&2; exit 1")
    assert result.exit_code == 1 and "Creating new namespace failed" in result.stderr


def test_a_real_refusal_is_a_sandbox_error():
    import pytest

    from evalq.errors import SandboxError
    from evalq.graders.sandbox.base import SandboxLimits
    from evalq.graders.sandbox.bwrap import run_in_bwrap

    with pytest.raises(SandboxError, match="bubblewrap refused to start: bwrap:"):
        run_in_bwrap(["--no-such-bwrap-option"], ["true"], env=dict(ENV),
                     limits=SandboxLimits(timeout_seconds=20))
