"""bubblewrap agent sandbox: own user, pid, ipc, uts, cgroup, mount and network namespaces.

The root is an empty tmpfs remounted read-only; on it: the host's /usr, /lib*, /bin (read-only),
a few generated /etc files, the run's profile (read-write; the workspace is inside it), the
adapter's declared read-only paths, a fresh /tmp, /dev and /proc, and with a door the prelude.
With a task's environment (task_root.py) the environment's tree takes the place of the host's
folders, and the workspace is also shown at the task's WORKDIR, where the agent starts.
pid 1 is bubblewrap's own init (started with the agent's environment only): it reaps, and
when the agent exits, bubblewrap exits with its status and the kernel ends every process left
in the pid namespace. With a door, as root with CAP_SYS_ADMIN the worker makes the door's
listener in the sandbox's network namespace itself before bubblewrap starts the agent
(netns_door.py); otherwise the prelude gets its channel as an inherited descriptor (nothing on
disk to connect to), hands the worker its listener and execs the agent (handoff.py).
The agent runs as uid 65534 with every capability dropped and no_new_privs,
under the grader's seccomp filter and a per-run cgroup (grading's `run_in_bwrap`).

Run as root, bubblewrap's own user namespace would map the agent's 65534 to the host's root:
every root-owned file it can see would be its own (a 0600 `.npmrc` token in an npm prefix
it is shown, root-only folders of /usr). So as root with CAP_SYS_ADMIN there is no user
namespace: bubblewrap makes the others, and setpriv turns the first process into the host's
uid 65534 with no capability and an empty bounding set, as the Docker backend's agent is.
Root without CAP_SYS_ADMIN (a container's root) may make no namespace but a user namespace:
setpriv makes it the host's uid 65534 before bubblewrap, which then makes its namespaces as
that user, as it does for an unprivileged caller. Either way the agent is the host's 65534
and gets its door, profile and workspace first. Without root, the agent is the caller's own
uid anyway.
"""

from __future__ import annotations

import logging
import os
from functools import lru_cache
from pathlib import Path

from evalq.errors import InfrastructureError, SandboxError
from evalq.graders.sandbox.bwrap import BwrapSandbox, let_others_pass, run_in_bwrap
from evalq.graders.sandbox.cgroups import sweep_orphans
from evalq.graders.sandbox.privilege import as_user, can_mount
from evalq.proc import ProcResult
from evalq.workers.sandbox.base import AGENT_DIR, AGENT_UID, DOOR_PORT, PRELUDE_PATH
from evalq.workers.sandbox.base import CHECK_DIR
from evalq.workers.sandbox.base import PRELUDE_SOURCE
from evalq.workers.sandbox.base import ETC_FILES as GENERATED
from evalq.workers.sandbox.base import (AgentJob, AgentSandbox, etc_dir, give_to_agent,
                                        prelude_argv)
from evalq.workers.sandbox.handoff import Handoff, with_door
from evalq.workers.sandbox.netns_door import NetnsDoor
from evalq.workers.sandbox.paths import ETC_FILES, host_toolchain_binds
from evalq.workers.sandbox.task_root import TaskRoot, agent_env, in_tree, tree_binds

#: the prelude runs on the toolchain's own interpreter (under /usr), never a virtualenv's
PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3")


def toolchain_python() -> str | None:
    return next((p for p in PYTHONS if os.access(p, os.X_OK)), None)


#: as root: what turns the agent (or, without CAP_SYS_ADMIN, bwrap) into the agent user
AS_AGENT = as_user(AGENT_UID)
#: as root with CAP_SYS_ADMIN: every namespace of --unshare-all but the user namespace
ROOT_NAMESPACES = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                   "--unshare-cgroup"]
#: otherwise: bwrap, run as the agent user, makes a user namespace too, and drops what it holds
USER_NAMESPACES = ["--unshare-all", "--uid", str(AGENT_UID), "--gid", str(AGENT_UID),
                   "--cap-drop", "ALL"]


def _as_root() -> bool:
    return os.geteuid() == 0


def bwrap_as_root() -> bool:
    """Whether bubblewrap itself runs as root, making every namespace but a user namespace:
    only with CAP_SYS_ADMIN. Root without it runs bubblewrap as the agent user."""
    return _as_root() and can_mount()


@lru_cache(maxsize=None)
def _note_once(note: str) -> None:
    """What a run lacked (no writable cgroup, no seccomp), in the worker's log once."""
    logging.getLogger("evalq.worker").warning("agent sandbox: %s", note)


def _folders_above(binds: list[tuple[str, str, str]]) -> list[str]:
    """Folders bubblewrap would make on its own to hold the bind targets: made 0700 and owned
    by the host's root, the agent (uid 65534, as root) could not pass them, so they are made
    0755 first. Not those inside another target, or the fresh /proc, /dev and /tmp."""
    targets = [Path(dst) for _, _, dst in binds]
    fresh = [Path("/proc"), Path("/dev"), Path("/tmp")]
    found: list[str] = []
    for target in targets:
        for folder in reversed(target.parents):
            if folder == Path("/") or folder in fresh or str(folder) in found:
                continue
            if any(other == folder or other in folder.parents for other in targets):
                continue
            found.append(str(folder))
    return found


def _scratch(path: str, job: AgentJob) -> list[str]:
    """A fresh tmpfs anyone may write (sticky, as in Docker) of the disk allowance: unsized, it
    would be half the host's memory, and without a cgroup nothing else would bound it."""
    return ["--perms", "1777", "--size", str(job.limits.disk_mb * 1024 * 1024), "--tmpfs", path]


def bwrap_options(job: AgentJob, as_root: bool | None = None,
                  prelude: bool = False, root: TaskRoot | None = None) -> list[str]:
    """Everything bwrap is told except the command: what the agent sees, and as whom;
    `as_root`: whether bwrap runs as root (bwrap_as_root() when not given); `prelude`: the
    door's prelude is shown (it opens the door from inside); `root`: the task's environment
    is the root instead of the worker's toolchain, the workspace also at its WORKDIR."""
    # bwrap as root: capabilities go with setpriv's switch to the agent user (AS_AGENT)
    as_root = bwrap_as_root() if as_root is None else as_root
    identity = ROOT_NAMESPACES if as_root else USER_NAMESPACES
    binds = [] if root is not None else [("--ro-bind-try", path, path) for path in ETC_FILES
                                         if os.path.basename(path) not in GENERATED]
    binds += [("--ro-bind", str(etc_dir() / name), f"/etc/{name}") for name in GENERATED]
    binds += [("--ro-bind", str(path), str(path)) for path in job.readonly]
    if job.agent_source is not None:
        binds.append(("--ro-bind", str(job.agent_source), AGENT_DIR))
    if job.check_folder is not None:
        binds.append(("--ro-bind", str(job.check_folder), CHECK_DIR))
    binds.append(("--bind", str(job.profile_root), str(job.profile_root)))
    if job.profile_root not in job.workspace.parents:
        binds.append(("--bind", str(job.workspace), str(job.workspace)))
    if root is not None:
        binds.append(("--bind", str(job.workspace), root.workdir))
    if prelude:
        binds.append(("--ro-bind", str(PRELUDE_SOURCE), PRELUDE_PATH))
    if root is None:
        base = host_toolchain_binds()
    else:
        assert root.tree is not None
        base = tree_binds(root.tree, [dst for _, _, dst in binds])
    options = [*identity, "--die-with-parent", "--new-session",
               "--hostname", "evalq-agent", *base,
               "--proc", "/proc", "--dev", "/dev", *_scratch("/tmp", job),
               *_scratch("/dev/shm", job)]
    for folder in _folders_above(binds):
        options += ["--perms", "0755", "--dir", folder]
    for bind in binds:
        options += list(bind)
    start = root.workdir if root is not None else str(job.workspace)
    return [*options, "--remount-ro", "/", "--chdir", start]


class BwrapAgentSandbox(AgentSandbox):
    name = "bwrap"

    def __init__(self, root: TaskRoot | None = None):
        #: the task's environment as the root (its tree); None: the worker's toolchain
        self.root = root

    def python(self) -> str | None:
        """The interpreter the door's prelude runs on: the root's own."""
        if self.root is None:
            return toolchain_python()
        assert self.root.tree is not None
        return next((p for p in PYTHONS if in_tree(self.root.tree, p)), None)

    @classmethod
    def available(cls) -> tuple[bool, str]:
        ok, why = BwrapSandbox.available()
        if ok and toolchain_python() is None:
            return False, ("no python3 under /usr (apt-get install -y python3): the door's "
                           "prelude needs it")
        return ok, why

    def run(self, job: AgentJob) -> ProcResult:
        ok, why = self.available()
        if not ok:
            raise InfrastructureError(why)
        if self.root is not None and bwrap_as_root() and not in_tree(self.root.tree,
                                                                     AS_AGENT[0]):
            raise InfrastructureError(
                f"the task environment {self.root.image} has no {AS_AGENT[0]} (util-linux), "
                "which makes the agent's first process the agent user: install it there")
        if self.door_from_outside():
            make = lambda: NetnsDoor(job.door, DOOR_PORT)  # noqa: E731
        elif job.door is not None and self.python() is None:
            raise InfrastructureError(
                f"the task environment {self.root.image if self.root else ''} has no python3 "
                f"({' or '.join(PYTHONS)}), which opens the agent's door from inside the "
                "sandbox here (run the worker as root with CAP_SYS_ADMIN to open it from "
                "outside, or install python3 in the task's environment)")
        else:
            make = lambda: Handoff(job.door, DOOR_PORT, inherited=True)  # noqa: E731
        return with_door(job, make, lambda door: self._run(job, door))

    def door_from_outside(self) -> bool:
        """Whether the worker opens a door itself, in the sandbox's network namespace
        (entering it takes CAP_SYS_ADMIN, which only root has here); else the prelude does,
        from inside."""
        return bwrap_as_root()

    def _run(self, job: AgentJob, door: Handoff | NetnsDoor | None) -> ProcResult:
        handoff = door if isinstance(door, Handoff) else None
        argv = job.argv if handoff is None else \
            prelude_argv(self.python(), job, f"fd:{handoff.sandbox_fd}")
        should_stop = job.should_stop
        if isinstance(door, NetnsDoor):  # stopped before its agent starts if the door fails
            should_stop = lambda: door.failed() or bool(job.should_stop and job.should_stop())  # noqa: E731
        as_root = bwrap_as_root()
        # root without CAP_SYS_ADMIN: bwrap itself runs as the agent user
        bwrap_as_agent = _as_root() and not as_root
        if _as_root():
            give_to_agent(job)
        if as_root:
            argv = [*AS_AGENT, *argv]
        if bwrap_as_agent:  # it must reach the profile to bind it
            for path in [job.profile_root, job.workspace]:
                if Path(path).parent != job.profile_root:
                    let_others_pass(Path(path).parent)
        try:
            options = bwrap_options(job, as_root, prelude=handoff is not None,
                                    root=self.root)
            fds: tuple[int, ...] = ()
            if handoff is not None:
                fds = (handoff.sandbox_fd,)
            elif door is not None:
                options, fds = [*door.options, *options], door.fds
            env = job.env if self.root is None else agent_env(self.root, job.env)
            run = run_in_bwrap(options, argv, env=env, limits=job.limits,
                               prefix=AS_AGENT if bwrap_as_agent else [], stdin=job.stdin,
                               should_stop=should_stop, pass_fds=fds)
        except SandboxError as exc:
            hint = "" if not bwrap_as_agent or "Permission denied" not in str(exc) else (
                f" (without CAP_SYS_ADMIN, bubblewrap runs as uid {AGENT_UID}: every folder "
                "above what the agent is shown must be searchable by others: chmod o+x)")
            raise InfrastructureError(f"agent sandbox: {exc}{hint}") from exc
        for note in run.notes:
            _note_once(note)
        return run.proc

    def sweep(self, max_age_seconds: float = 0) -> int:
        """Orphan per-run cgroups (named after their worker process, as grading's are)."""
        return sweep_orphans(max_age_seconds)
