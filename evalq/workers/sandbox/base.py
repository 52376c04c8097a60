"""The agent sandbox interface: run an agent's process tree sealed off from the host.

Backends plug in by name (`bwrap`, `docker`, `none`). Inside a sealed sandbox the agent sees
its workspace and profile (read-write, at their host paths so adapters need no translation),
the toolchain and the read-only paths its adapter declares, its condition's agent source
read-only at AGENT_DIR, a fresh /tmp and /dev, and a
/proc of its own pid namespace; its only network is the door: 127.0.0.1:DOOR_PORT, a socket
listening in the sandbox's own network namespace, made there by the worker (netns_door.py) or
by the prelude (prelude.py, handoff.py), whose connections the worker's model gateway accepts.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from abc import ABC, abstractmethod
from contextlib import contextmanager
from functools import lru_cache
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterator, Optional
from urllib.parse import urlsplit, urlunsplit

from evalq.graders.sandbox.base import SandboxLimits
from evalq.proc import ProcResult

#: where the sandbox sees the prelude, the door's channel (Docker) and the stdin file
RUN_DIR = "/run/evalq"
PRELUDE_PATH = f"{RUN_DIR}/prelude.py"
DOOR_PATH = f"{RUN_DIR}/door.sock"
STDIN_PATH = f"{RUN_DIR}/stdin"
#: where a sealed agent sees the visible-check shim's folder, read-only (its bin/ leads PATH)
CHECK_DIR = f"{RUN_DIR}/check"
#: where a sealed agent sees its condition's agent source, read-only (`{agent_dir}`)
AGENT_DIR = "/evalq/agent"
#: the door's port on the sandbox's own loopback (each sandbox has its own network namespace)
DOOR_PORT = 8976
PRELUDE_SOURCE = Path(__file__).with_name("prelude.py")
#: uid and gid of the agent inside the sandbox
AGENT_UID = 65534

#: defaults for an agent run when neither the fixture nor the study's budgets say otherwise
DEFAULT_MEMORY_MB = 4096
DEFAULT_PIDS = 512
DEFAULT_CPUS = 2.0
DEFAULT_FILE_MB = 1024
#: the most an agent run may write in all to its profile (workspace, home, logs): its tmpfs
DEFAULT_DISK_MB = 2048
#: what a sealed agent finds in its credential variables: the real key stays outside


@dataclass
class AgentJob:
    """One agent run: argv with cwd = workspace, its complete environment, what it may see."""

    argv: list[str]
    env: dict[str, str]
    workspace: Path
    profile_root: Path
    limits: SandboxLimits
    readonly: list[Path] = field(default_factory=list)
    #: the condition's agent source on the worker, mounted read-only at AGENT_DIR
    agent_source: Optional[Path] = None
    #: the model gateway's run this sandbox's door opens to (an open GatewayRun); None: no
    #: network at all
    door: Optional[Any] = None
    stdin: Optional[bytes] = None
    #: the visible-check shim's folder on the worker (visible_check/channel.py), mounted
    #: read-only at CHECK_DIR; None: the fixture declares no visible check
    check_folder: Optional[Path] = None
    should_stop: Optional[Callable[[], bool]] = None
    label: str = ""


class AgentSandbox(ABC):
    """Runs an agent; returns once everything it started is gone."""

    name: ClassVar[str]
    #: False only for `none`: the run is then marked unsealed in the lock and report
    sealed: ClassVar[bool] = True
    #: what the janitor's log calls this backend's leftovers
    phase: ClassVar[str] = "agent runs"

    @abstractmethod
    def run(self, job: AgentJob) -> ProcResult:
        """Run job.argv sealed; on wall time, output overflow or should_stop, kill it all."""

    @classmethod
    def available(cls) -> tuple[bool, str]:
        return True, ""

    def model_url(self, upstream: Optional[str]) -> Optional[str]:
        """The base URL the agent is given: the door inside, keeping the upstream's path."""
        if not upstream:
            return None
        path = urlsplit(upstream).path.rstrip("/")
        return urlunsplit(("http", f"127.0.0.1:{DOOR_PORT}", path, "", ""))

    def sweep(self, max_age_seconds: float = 0) -> int:
        """Remove leftovers of crashed agent runs (cgroups, containers); returns how many."""
        return 0


def agent_limits(limits, budgets, output_limit: int) -> SandboxLimits:
    """The sandbox limits of an agent run: its effective wall time, and memory, pids and CPUs
    from the study's budgets (fields left out, or no budgets: the defaults)."""

    def budget(name: str, default):
        value = getattr(budgets, name, None) if budgets is not None else None
        return default if value is None else value

    return SandboxLimits(timeout_seconds=limits.wall_seconds,
                         memory_mb=budget("memory_mb", DEFAULT_MEMORY_MB),
                         pids=budget("pids", DEFAULT_PIDS), cpus=budget("cpus", DEFAULT_CPUS),
                         output_limit_bytes=output_limit, disk_mb=DEFAULT_FILE_MB)


def prelude_argv(python: str, job: AgentJob, channel: Optional[str],
                 stdin: Optional[str] = None) -> list[str]:
    """The command line that opens the door over `channel` (or "-"), sets stdin (a file, or
    "-"), then execs the agent's argv."""
    return [python, "-I", "-S", PRELUDE_PATH, channel or "-", str(DOOR_PORT), stdin or "-",
            "--", *job.argv]


#: the few /etc files an agent needs, generated: nothing of the host's users or hosts
ETC_FILES = {
    "passwd": f"root:x:0:0:root:/root:/bin/sh\nagent:x:{AGENT_UID}:{AGENT_UID}:agent:/tmp:"
              "/bin/sh\n",
    "group": f"root:x:0:\nagent:x:{AGENT_UID}:\n",
    "hosts": "127.0.0.1 localhost\n::1 localhost\n",
    "nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n",
    # else Docker puts a copy of the host's own there (its name servers and search domains)
    "resolv.conf": "# no name servers: the only way out is the model gateway's door\n",
}


def own_door(socket_path: str) -> None:
    """Only the agent user may connect to a door's channel (its folder is the worker's own):
    no other local user hands the gateway a listener. Without root, open it up instead."""
    try:
        os.chown(socket_path, AGENT_UID, AGENT_UID)
    except PermissionError:
        os.chmod(socket_path, 0o666)


def give_to_agent(job: AgentJob) -> None:
    """Before a run whose agent is the host's uid AGENT_UID: its profile and workspace become
    its own (never following a link out of them; they are fresh copies)."""
    from evalq.graders.sandbox.docker import _make_writable_by_sandbox

    _make_writable_by_sandbox(job.profile_root, AGENT_UID)
    if job.profile_root not in job.workspace.parents:
        _make_writable_by_sandbox(job.workspace, AGENT_UID)


@lru_cache(maxsize=1)
def etc_dir() -> Path:
    """A folder of this worker process with the generated /etc files, each mounted read-only
    into every sandbox (the same for all runs: made once, removed when the process ends)."""
    folder = Path(tempfile.mkdtemp(prefix="evalq-agent-etc-"))
    atexit.register(shutil.rmtree, folder, True)
    for name, text in ETC_FILES.items():
        (folder / name).write_text(text)
        os.chmod(folder / name, 0o644)
    os.chmod(folder, 0o755)
    return folder


@contextmanager
def stdin_file(job: AgentJob) -> Iterator[Optional[Path]]:
    """The agent's standard input as a file the sandbox user can read, for the run."""
    if not job.stdin:
        yield None
        return
    folder = Path(tempfile.mkdtemp(prefix="evalq-agent-stdin-"))
    try:
        (folder / "stdin").write_bytes(job.stdin)
        os.chmod(folder / "stdin", 0o644)
        os.chmod(folder, 0o755)
        yield folder / "stdin"
    finally:
        shutil.rmtree(folder, ignore_errors=True)
