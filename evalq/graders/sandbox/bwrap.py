"""bubblewrap backend: namespaces, a read-only system view, cgroup limits, no network.

For hosts without a Docker engine. Runs the command as an unprivileged user (uid 65534)
when evalq itself runs as root, in new user, pid, net, ipc, uts, cgroup and mount namespaces.
"""

from __future__ import annotations

import os
import resource
import signal
import shutil
from pathlib import Path

from evalq.errors import SandboxError
from evalq.proc import run_bounded
from evalq.graders.sandbox.base import (REPORT_PATH, WORKSPACE_PATH, ExecResult, RunExtras,
                                        Sandbox, SandboxLimits)
from evalq.graders.sandbox.cgroups import RunCgroup, sweep_orphans
from evalq.graders.sandbox.scratch import size_capped, sweep_mounts
from evalq.graders.sandbox.seccomp import filter_fd

NOBODY = 65534
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = ("/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
             "/etc/localtime", "/etc/mime.types")


def _system_binds() -> list[str]:
    args: list[str] = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in ETC_FILES:
        args += ["--ro-bind-try", path, path]
    return args


def _own_for_nobody(root: Path, uid: int = NOBODY) -> None:
    """Let the unprivileged sandbox user reach and write its fresh workspace copy."""
    parent = root.resolve().parent
    mode = parent.stat().st_mode
    if not mode & 0o001:
        os.chmod(parent, mode | 0o011)
    os.chown(root, uid, uid)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            os.lchown(os.path.join(dirpath, name), uid, uid)


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            pass
    return found


def stop_from_inside(proc) -> None:
    """Kill the namespace's init first, so the outer bwrap reaps it and exits by itself.

    Killing the outer bwrap first would orphan its child to the host's init, which on some
    hosts never reaps it (a zombie per timed-out grading).
    """
    for child in _children(proc.pid):
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass


class BwrapSandbox(Sandbox):
    name = "bwrap"
    passes_fds = True  # RunExtras.pass_fds reach the command (split grading's channel)

    @classmethod
    def available(cls) -> tuple[bool, str]:
        if shutil.which("bwrap") is None:
            return False, "bubblewrap is not installed (apt-get install -y bubblewrap)"
        return True, ""

    def scratch(self, folder: Path, limits: SandboxLimits):
        """The workspace and report share a tmpfs of the disk allowance (sandbox/scratch.py)."""
        return size_capped(folder, limits.disk_mb)

    def run(self, argv, *, workspace, report_dir, limits: SandboxLimits, env, image=None,
            label="", extras: RunExtras | None = None) -> ExecResult:
        ok, why = self.available()
        if not ok:
            raise SandboxError(why)
        extras = extras or RunExtras()
        uid = NOBODY if extras.uid is None else extras.uid
        as_root = os.geteuid() == 0
        if as_root:
            _own_for_nobody(workspace, uid)
            _own_for_nobody(report_dir, uid)
        ro_binds = [a for src, dst in extras.ro_binds for a in ("--ro-bind", src, dst)]
        group = RunCgroup.create(limits.memory_mb, limits.pids, limits.cpus) if as_root else None
        notes = [] if group else ["no writable cgroup: memory and process limits use rlimits"]
        seccomp_fd = filter_fd()
        if seccomp_fd is None:
            notes.append("libseccomp not found: no system-call filter")
        seccomp_args = ["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []
        bwrap = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session",
                 "--hostname", "evalq-sandbox", "--cap-drop", "ALL",
                 *_system_binds(), "--proc", "/proc", "--dev", "/dev",
                 "--size", str(64 * 1024 * 1024), "--tmpfs", "/tmp",
                 "--bind", str(workspace), WORKSPACE_PATH,
                 "--bind", str(report_dir), REPORT_PATH, *ro_binds,
                 "--remount-ro", "/", *seccomp_args, "--chdir", WORKSPACE_PATH, "--", *argv]
        if as_root:
            bwrap = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                     "--inh-caps=-all", *bwrap]

        def preexec() -> None:
            if group is not None:
                group.join()
            else:
                as_bytes = limits.memory_mb * 1024 * 1024
                resource.setrlimit(resource.RLIMIT_AS, (as_bytes, as_bytes))
                resource.setrlimit(resource.RLIMIT_NPROC, (limits.pids, limits.pids))
            disk = limits.disk_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_FSIZE, (disk, disk))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

        def kill_rest() -> None:
            if group is not None:
                group.kill_all()

        try:
            result = run_bounded(bwrap, env=dict(env), cwd="/", timeout=limits.timeout_seconds,
                                 output_limit=limits.output_limit_bytes, preexec=preexec,
                                 on_kill=kill_rest, grace_seconds=5.0,
                                 terminate=stop_from_inside, should_stop=extras.should_stop,
                                 pass_fds=((seccomp_fd,) if seccomp_fd is not None else ())
                                 + extras.pass_fds)
            limit_hit = group.limit_hit() if group is not None else None
        except OSError as exc:
            raise SandboxError(f"bubblewrap could not start: {exc}") from exc
        finally:
            if seccomp_fd is not None:
                os.close(seccomp_fd)
            if group is not None:
                group.kill_all()
                group.remove()
        if result.timed_out:
            limit_hit = "time"
        elif result.output_exceeded:
            limit_hit = "output"
        stderr = result.stderr.decode("utf-8", "replace")
        if result.exit_code == 1 and stderr.startswith("bwrap:"):
            raise SandboxError(f"bubblewrap refused to start: {stderr.strip()[:300]}")
        return ExecResult(exit_code=result.exit_code,
                          stdout=result.stdout.decode("utf-8", "replace"), stderr=stderr,
                          duration_seconds=result.duration_seconds, timed_out=result.timed_out,
                          limit_hit=limit_hit, signal=result.signal, notes=notes)

    def sweep(self, max_age_seconds: float = 0) -> int:
        """Orphan cgroups and grading tmpfs mounts (their grading process is gone, or too old)."""
        return sweep_orphans(max_age_seconds) + sweep_mounts(max_age_seconds)
