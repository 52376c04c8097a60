"""bubblewrap agent sandbox: own user, pid, ipc, uts, cgroup, mount and network namespaces.

The root is an empty tmpfs remounted read-only; on it: the host's /usr, /lib*, /bin (read-only),
a few generated /etc files, the run's profile (read-write; the workspace is inside it), the
adapter's declared read-only paths, a fresh /tmp, /dev and /proc, the launcher (pid 1) and the
door's socket. The agent runs as uid 65534 with every capability dropped and no_new_privs,
under the grader's seccomp filter and a per-run cgroup (grading's `run_in_bwrap`).
"""

from __future__ import annotations

import os

from evalq.errors import InfrastructureError, SandboxError
from evalq.graders.sandbox.bwrap import BwrapSandbox, run_in_bwrap
from evalq.graders.sandbox.cgroups import sweep_orphans
from evalq.proc import ProcResult
from evalq.workers.sandbox.base import AGENT_UID, DOOR_PATH, LAUNCHER_PATH, LAUNCHER_SOURCE
from evalq.workers.sandbox.base import ETC_FILES as GENERATED
from evalq.workers.sandbox.base import AgentJob, AgentSandbox, etc_dir, launcher_argv
from evalq.workers.sandbox.paths import ETC_FILES, host_toolchain_binds

#: the launcher runs on the toolchain's own interpreter (under /usr), never a virtualenv's
PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3")


def toolchain_python() -> str | None:
    return next((p for p in PYTHONS if os.access(p, os.X_OK)), None)


def bwrap_options(job: AgentJob) -> list[str]:
    """Everything bwrap is told except the command: what the agent sees, and as whom."""
    # with a door, pid 1 is the launcher; without, bwrap's own init (started, like the
    # launcher, with the agent's environment only) reaps and ends the sandbox with the agent
    pid1 = ["--as-pid-1"] if job.door_socket else []
    options = ["--unshare-all", "--die-with-parent", "--new-session", *pid1,
               "--hostname", "evalq-agent", "--uid", str(AGENT_UID), "--gid", str(AGENT_UID),
               "--cap-drop", "ALL", *host_toolchain_binds()]
    for path in ETC_FILES:
        if os.path.basename(path) not in GENERATED:
            options += ["--ro-bind-try", path, path]
    for name in GENERATED:
        options += ["--ro-bind", str(etc_dir() / name), f"/etc/{name}"]
    options += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for path in job.readonly:
        options += ["--ro-bind", str(path), str(path)]
    options += ["--bind", str(job.profile_root), str(job.profile_root)]
    if job.profile_root not in job.workspace.parents:
        options += ["--bind", str(job.workspace), str(job.workspace)]
    if job.door_socket:
        options += ["--ro-bind", str(LAUNCHER_SOURCE), LAUNCHER_PATH,
                    "--bind", job.door_socket, DOOR_PATH]
    return [*options, "--remount-ro", "/", "--chdir", str(job.workspace)]


class BwrapAgentSandbox(AgentSandbox):
    name = "bwrap"

    @classmethod
    def available(cls) -> tuple[bool, str]:
        ok, why = BwrapSandbox.available()
        if ok and toolchain_python() is None:
            return False, "no python3 under /usr (apt-get install -y python3): the launcher needs it"
        return ok, why

    def run(self, job: AgentJob) -> ProcResult:
        ok, why = self.available()
        if not ok:
            raise InfrastructureError(why)
        argv = launcher_argv(toolchain_python(), job) if job.door_socket else job.argv
        try:
            run = run_in_bwrap(bwrap_options(job), argv, env=job.env, limits=job.limits,
                               stdin=job.stdin, should_stop=job.should_stop)
        except SandboxError as exc:
            raise InfrastructureError(f"agent sandbox: {exc}") from exc
        return run.proc

    def sweep(self, max_age_seconds: float = 0) -> int:
        """Orphan per-run cgroups (named after their worker process, as grading's are)."""
        return sweep_orphans(max_age_seconds)
