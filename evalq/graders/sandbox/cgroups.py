"""Per-run cgroups (v1 or v2) that cap memory and process count, and kill everything at the end.

Used by the bubblewrap backend; rlimits are the fallback where cgroups are not writable.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from evalq.graders.sandbox.owner import orphaned, owned_name

ROOT = Path("/sys/fs/cgroup")
PREFIX = "evalq-"


def _writable(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK)


def _layout() -> int:
    """1 with writable v1 memory and pids hierarchies, 2 with a writable v2 root holding both
    controllers, else 0 (no root, or a container's read-only /sys/fs/cgroup)."""
    if _writable(ROOT / "memory") and _writable(ROOT / "pids"):
        return 1
    controllers = ROOT / "cgroup.controllers"
    if controllers.exists() and _writable(ROOT):
        have = controllers.read_text().split()
        if "memory" in have and "pids" in have:
            return 2
    return 0


def can_make_cgroups() -> bool:
    """Whether this process can make per-run cgroups (a matter of write access to the tree,
    not of CAP_SYS_ADMIN: a container's root often has the one and not the other)."""
    try:
        return _layout() != 0
    except OSError:
        return False


@dataclass
class RunCgroup:
    """The cgroup directories of one sandboxed run (one per v1 controller, or one v2 dir)."""

    dirs: list[Path] = field(default_factory=list)
    version: int = 0

    @classmethod
    def create(cls, memory_mb: int, pids: int, cpus: float = 1.0) -> "RunCgroup | None":
        name = owned_name(PREFIX) + uuid.uuid4().hex[:12]
        v1_memory, v1_pids, v1_cpu = ROOT / "memory", ROOT / "pids", ROOT / "cpu"
        period = 100_000
        try:
            layout = _layout()
            if layout == 1:
                group = cls(version=1)
                mem = v1_memory / name
                pid = v1_pids / name
                mem.mkdir()
                group.dirs.append(mem)
                pid.mkdir()
                group.dirs.append(pid)
                if _writable(v1_cpu):
                    cpu = v1_cpu / name
                    cpu.mkdir()
                    group.dirs.append(cpu)
                    (cpu / "cpu.cfs_period_us").write_text(str(period))
                    (cpu / "cpu.cfs_quota_us").write_text(str(int(cpus * period)))
                limit = str(memory_mb * 1024 * 1024)
                (mem / "memory.limit_in_bytes").write_text(limit)
                swap = mem / "memory.memsw.limit_in_bytes"
                if swap.exists():
                    swap.write_text(limit)
                (pid / "pids.max").write_text(str(pids))
                return group
            if layout == 2:
                group = cls(version=2)
                path = ROOT / name
                path.mkdir()
                group.dirs.append(path)
                (path / "memory.max").write_text(str(memory_mb * 1024 * 1024))
                swap = path / "memory.swap.max"
                if swap.exists():
                    swap.write_text("0")
                (path / "pids.max").write_text(str(pids))
                if "cpu" in (ROOT / "cgroup.controllers").read_text().split():
                    (path / "cpu.max").write_text(f"{int(cpus * period)} {period}")
                return group
        except OSError:
            if "group" in locals():
                group.remove()
        return None

    def join(self) -> None:
        """Move the calling process into the cgroup (called in the child before exec)."""
        pid = str(os.getpid())
        for path in self.dirs:
            with open(path / "cgroup.procs", "w") as handle:
                handle.write(pid)

    def pids(self) -> set[int]:
        found: set[int] = set()
        for path in self.dirs:
            try:
                found.update(int(p) for p in (path / "cgroup.procs").read_text().split())
            except (OSError, ValueError):
                pass
        return found

    def kill_all(self, deadline_seconds: float = 5.0) -> bool:
        """SIGKILL every member until none is left; True when the cgroup is empty."""
        end = time.monotonic() + deadline_seconds
        kill_file = self.dirs[0] / "cgroup.kill" if self.version == 2 and self.dirs else None
        while time.monotonic() < end:
            members = self.pids()
            if not members:
                return True
            if kill_file is not None and kill_file.exists():
                kill_file.write_text("1")
            for pid in members:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.01)
        return not self.pids()

    def limit_hit(self) -> str | None:
        """'memory' or 'pids' when the kernel refused or killed something for a limit."""
        for path in self.dirs:
            for events_name, key, label in (("memory.oom_control", "oom_kill", "memory"),
                                            ("memory.events", "oom_kill", "memory"),
                                            ("pids.events", "max", "pids")):
                events = path / events_name
                if not events.exists():
                    continue
                for line in events.read_text().splitlines():
                    parts = line.split()
                    if len(parts) == 2 and parts[0] == key and parts[1] != "0":
                        return label
            failcnt = path / "memory.failcnt"
            if failcnt.exists() and failcnt.read_text().strip() not in ("", "0"):
                max_usage = path / "memory.max_usage_in_bytes"
                limit = path / "memory.limit_in_bytes"
                if max_usage.exists() and int(max_usage.read_text()) >= int(limit.read_text()):
                    return "memory"
        return None

    def remove(self) -> None:
        for path in self.dirs:
            try:
                path.rmdir()
            except OSError:
                pass


def sweep_orphans(max_age_seconds: float = 0) -> int:
    """Kill and remove evalq cgroups whose grading process is gone or that are too old."""
    removed = 0
    now = time.time()
    candidates = [d for d in ROOT.glob(f"*/{PREFIX}*")] + [d for d in ROOT.glob(f"{PREFIX}*")]
    for path in candidates:
        try:
            age = now - path.stat().st_mtime
        except OSError:
            continue
        if not orphaned(path.name, PREFIX, age, max_age_seconds):
            continue
        group = RunCgroup(dirs=[path], version=2 if path.parent == ROOT else 1)
        group.kill_all(1.0)
        group.remove()
        removed += 0 if path.exists() else 1
    return removed
