"""bubblewrap backend: namespaces, the toolchain's rootfs read-only as /, cgroup limits, no network.

For hosts without a Docker engine. Runs the command as an unprivileged user (uid 65534)
when evalq itself runs as root, in new user, pid, net, ipc, uts, cgroup and mount namespaces.
Its root is the tree the fixture's Docker image was imported from (sandbox/toolchain.py),
never the host's /usr, so both backends grade with the same toolchain.
"""

from __future__ import annotations

import os
import resource
import signal
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from evalq.errors import SandboxError
from evalq.proc import ProcResult, run_bounded
from evalq.graders.sandbox.base import (REPORT_PATH, SHM_MB, WORKSPACE_PATH, ExecResult,
                                        RunExtras, Sandbox, SandboxLimits)
from evalq.graders.sandbox.cgroups import RunCgroup, can_make_cgroups, sweep_orphans
from evalq.graders.sandbox.privilege import as_user
from evalq.graders.sandbox.scratch import size_capped, sweep_mounts
from evalq.graders.sandbox.seccomp import filter_fd, read_all
from evalq.graders.sandbox.toolchain import DEFAULT_IMAGE, local_rootfs

NOBODY = 65534


def let_others_pass(folder: Path) -> None:
    """Make `folder` searchable (not listable) by other users: bubblewrap, run as the sandbox
    user, must reach what it binds below it."""
    mode = folder.stat().st_mode
    if not mode & 0o001:
        os.chmod(folder, mode | 0o011)


def _own_for_nobody(root: Path, uid: int = NOBODY) -> None:
    """Let the unprivileged sandbox user reach and write its fresh workspace copy."""
    let_others_pass(root.resolve().parent)
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


#: what a sandbox gets fresh, never from the rootfs tree
FRESH = {"proc", "dev", "tmp", "workspace", "report"}


def rootfs_binds(root: Path) -> list[str]:
    """bwrap options making the toolchain's rootfs the sandbox's root: a tmpfs `/` (remounted
    read-only once every mount point is made: the judge's extra binds need theirs) holding the
    tree's top-level folders read-only and its top-level links as links."""
    args = ["--tmpfs", "/"]
    for entry in sorted(root.iterdir()):
        if entry.name in FRESH:
            continue
        if entry.is_symlink():
            args += ["--symlink", os.readlink(entry), f"/{entry.name}"]
        elif entry.is_dir():
            args += ["--ro-bind", str(entry), f"/{entry.name}"]
    return args


def tmpfs_options(limits: SandboxLimits) -> list[str]:
    """/tmp and /dev/shm as Docker's grading containers have them (docker.locked_down): /tmp a
    tmpfs of the disk allowance, /dev/shm one of SHM_MB. They were 64 MB and unbounded here
    (but for memory), so code that needs 100 MB of /tmp, or of /dev/shm, got one verdict in
    one backend and the other in the other."""
    return ["--size", str(int(limits.disk_mb) * 1024 * 1024), "--tmpfs", "/tmp",
            "--size", str(SHM_MB * 1024 * 1024), "--tmpfs", "/dev/shm"]


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

    def toolchain(self, image=None):
        return local_rootfs(image or DEFAULT_IMAGE)

    def run(self, argv, *, workspace, report_dir, limits: SandboxLimits, env, image=None,
            label="", extras: RunExtras | None = None) -> ExecResult:
        ok, why = self.available()
        if not ok:
            raise SandboxError(why)
        toolchain = local_rootfs(image or DEFAULT_IMAGE)
        extras = extras or RunExtras()
        uid = NOBODY if extras.uid is None else extras.uid
        as_root = os.geteuid() == 0
        if as_root:
            _own_for_nobody(workspace, uid)
            _own_for_nobody(report_dir, uid)
        extra_binds = [a for src, dst in extras.ro_binds for a in ("--ro-bind", src, dst)]
        extra_binds += [a for src, dst in extras.rw_binds for a in ("--bind", src, dst)]
        options = ["--unshare-all", "--die-with-parent", "--new-session",
                   "--hostname", "evalq-sandbox", "--cap-drop", "ALL",
                   *rootfs_binds(toolchain.root), "--proc", "/proc", "--dev", "/dev",
                   *tmpfs_options(limits),
                   "--bind", str(workspace), WORKSPACE_PATH,
                   "--bind", str(report_dir), REPORT_PATH, *extra_binds,
                   "--remount-ro", "/", "--chdir", WORKSPACE_PATH]
        # as root (with or without CAP_SYS_ADMIN), bwrap makes the user namespace as `uid`
        prefix = as_user(uid) if as_root else []
        run = run_in_bwrap(options, argv, env=env, limits=limits, prefix=prefix,
                           should_stop=extras.should_stop, pass_fds=extras.pass_fds)
        result, limit_hit, notes = run.proc, run.limit_hit, run.notes
        stderr = result.stderr.decode("utf-8", "replace")
        return ExecResult(exit_code=result.exit_code,
                          stdout=result.stdout.decode("utf-8", "replace"), stderr=stderr,
                          duration_seconds=result.duration_seconds, timed_out=result.timed_out,
                          limit_hit=limit_hit, signal=result.signal, notes=notes,
                          toolchain=toolchain)

    def sweep(self, max_age_seconds: float = 0) -> int:
        """Orphan cgroups and grading tmpfs mounts (their grading process is gone, or too old)."""
        return sweep_orphans(max_age_seconds) + sweep_mounts(max_age_seconds)


#: $1 = file size limit in 512-byte blocks (dash's unit), then cgroup dirs up to "--"
JOIN_SCRIPT = ('ulimit -c 0 && ulimit -f "$1" || exit 125; shift; '
               'while [ "$1" != -- ]; do echo $$ > "$1/cgroup.procs" || exit 125; shift; done; '
               'shift; exec "$@"')


@dataclass
class BwrapRun:
    """What one bounded bubblewrap run gave: the process result, a limit it hit, notes."""

    proc: ProcResult
    limit_hit: Optional[str]
    notes: list[str]


def run_in_bwrap(options: list[str], argv: list[str], *, env: dict[str, str],
                 limits: SandboxLimits, prefix: list[str] | None = None,
                 stdin: bytes | None = None, should_stop=None,
                 pass_fds: tuple[int, ...] = ()) -> BwrapRun:
    """bwrap OPTIONS -- ARGV in a per-run cgroup (else rlimits), under the seccomp filter,
    with the wall-time and output limits; everything it started is gone when this returns.

    Shared by the grading and the agent sandboxes (evalq/workers/sandbox/bwrap.py).
    """
    ok, why = BwrapSandbox.available()
    if not ok:
        raise SandboxError(why)
    group = RunCgroup.create(limits.memory_mb, limits.pids, limits.cpus) \
        if can_make_cgroups() else None
    notes = [] if group else ["no writable cgroup: memory and process limits use rlimits"]
    seccomp_fd = filter_fd()
    if seccomp_fd is None:
        notes.append("libseccomp not found: no system-call filter")
    seccomp_args = ["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []
    # bwrap writes "exit-code" here only once the command really ran: a refusal is told apart
    # from sandboxed code that merely prints "bwrap: ..." and exits 1
    status_read, status_write = os.pipe()
    disk = limits.disk_mb * 1024 * 1024
    # With a cgroup, a shell joins it and sets the file limits, then execs bwrap: no preexec_fn,
    # so the worker is not forked (vfork instead), which saves ~15 ms per run.
    join = [] if group is None else ["/bin/sh", "-c", JOIN_SCRIPT, "evalq-join",
                                     str(disk // 512), *map(str, group.dirs), "--"]
    command = [*join, *(prefix or []), "bwrap", "--json-status-fd", str(status_write),
               *seccomp_args, *options, "--", *argv]
    fds = ((status_write,) if seccomp_fd is None else (status_write, seccomp_fd)) + pass_fds

    def preexec() -> None:  # without a cgroup only
        as_bytes = limits.memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (as_bytes, as_bytes))
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.pids, limits.pids))
        resource.setrlimit(resource.RLIMIT_FSIZE, (disk, disk))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    def kill_rest() -> None:  # one pass now; the wait for an empty cgroup comes after the reap
        for pid in group.pids() if group is not None else ():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    try:
        result = run_bounded(command, env=dict(env), cwd="/", timeout=limits.timeout_seconds,
                             output_limit=limits.output_limit_bytes,
                             preexec=preexec if group is None else None,
                             on_kill=kill_rest, grace_seconds=5.0, terminate=stop_from_inside,
                             stdin=stdin, should_stop=should_stop, pass_fds=fds)
        limit_hit = group.limit_hit() if group is not None else None
    except OSError as exc:
        raise SandboxError(f"bubblewrap could not start: {exc}") from exc
    finally:
        os.close(status_write)
        os.set_blocking(status_read, False)  # never wait on a writer that outlived the run
        try:
            status = read_all(status_read)
        except BlockingIOError:
            status = b""
        os.close(status_read)
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
    # a refusal: bwrap exits 1 with its own "bwrap: ..." line and never reports a child exit
    # code; a run stopped from outside can miss the status too, but says nothing of bwrap's
    if result.exit_code == 1 and b'"exit-code"' not in status and \
            stderr.lstrip().startswith("bwrap:"):
        raise SandboxError(f"bubblewrap refused to start: {stderr.strip()[:300]}")
    return BwrapRun(result, limit_hit, notes)
