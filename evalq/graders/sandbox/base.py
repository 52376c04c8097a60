"""The sandbox interface: a few verbs, backends plugged in by name (like Inspect AI's sandboxes)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, ClassVar, Optional

from evalq.graders.sandbox.toolchain import Toolchain

#: Paths every backend presents inside the sandbox.
WORKSPACE_PATH = "/workspace"
REPORT_PATH = "/report"
#: MB of /dev/shm in every backend (Docker's default, pinned so that both give the same)
SHM_MB = 64


@dataclass(frozen=True)
class SandboxLimits:
    timeout_seconds: float = 120.0
    memory_mb: int = 512
    pids: int = 128
    cpus: float = 1.0
    output_limit_bytes: int = 1_000_000
    disk_mb: int = 256


@dataclass(frozen=True)
class RunExtras:
    """What a split grading adds to a run (graders/split.py): read-only binds of host paths,
    writable ones (the folder judge and subject share), file descriptors passed in (the
    judge-subject channel), the user id to run as, and a callable that says when to stop
    early (the judge is done with its subject)."""

    ro_binds: tuple[tuple[str, str], ...] = ()
    rw_binds: tuple[tuple[str, str], ...] = ()
    pass_fds: tuple[int, ...] = ()
    uid: Optional[int] = None
    should_stop: Optional[Callable[[], bool]] = None


@dataclass
class ExecResult:
    """What happened to one command. `limit_hit` names a limit the sandbox enforced, if any."""

    exit_code: Optional[int]
    stdout: str
    stderr: str
    duration_seconds: float
    timed_out: bool = False
    limit_hit: Optional[str] = None  # "time" | "memory" | "pids" | "output" | None
    signal: Optional[int] = None
    notes: list[str] = field(default_factory=list)
    #: the root file system the command ran in (sandbox/toolchain.py)
    toolchain: Optional[Toolchain] = None


class Sandbox(ABC):
    """Runs untrusted code against a directory with no network, no credential and hard limits.

    `workspace` is mounted read-write at WORKSPACE_PATH and `report_dir` at REPORT_PATH;
    nothing else of the host is writable. `env` is the complete environment: nothing of the
    caller's environment is passed through.
    """

    name: ClassVar[str]

    @abstractmethod
    def run(self, argv: list[str], *, workspace: Path, report_dir: Path,
            limits: SandboxLimits, env: dict[str, str], image: str | None = None,
            label: str = "", extras: RunExtras | None = None) -> ExecResult:
        """Run argv with cwd=WORKSPACE_PATH and return once everything it started is gone."""

    @classmethod
    def available(cls) -> tuple[bool, str]:
        """Whether this backend can run here, and if not, how to make it so."""
        return True, ""

    def toolchain(self, image: str | None = None) -> Optional[Toolchain]:
        """The root file system `image` would run in now, without running anything (what a
        grader's self-check is keyed by); SandboxError if it cannot be found."""
        return None

    def scratch(self, folder: Path, limits: SandboxLimits):
        """A context in which the empty `folder` holds a grading's workspace and report;
        yields a sandbox.scratch.Scratch (is its total size capped, and if not, why)."""
        from evalq.graders.sandbox.scratch import uncapped

        return uncapped(folder)

    def sweep(self, max_age_seconds: float = 0) -> int:
        """Remove leftovers (containers, cgroups) of crashed graders; returns how many."""
        return 0
