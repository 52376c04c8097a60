"""Leftovers of a grading name the process that made them, so a sweep tells orphans from live runs.

A per-run cgroup or grading directory is called `<prefix><pid namespace>.<pid>-<random>`.
When the grading worker process that made it has died (a crash, a SIGKILL, an OOM kill), the
leftover is an orphan and can go at once; one whose maker still runs is left alone, however
old, unless it is older than the sweep's max age (a stuck run, or a pid reused by another
process). A pid means something only in its own pid namespace: grading workers in several
containers share one scratch folder on the host (compose), and each sees the others' pids as
dead. So a sweeper judges by liveness only what its own pid namespace made, the rest by age.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Optional


def process_start(pid: int) -> Optional[str]:
    """The kernel's start time of a process (field 22 of /proc/pid/stat); None when it is gone.
    With the pid it names one process for good: pids are reused, start times with them are not."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2:].split()[19]


def pid_namespace() -> int:
    """This process's pid namespace (its inode), the same for every process in a container."""
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return 0


def owned_name(prefix: str) -> str:
    """The start of a name that records this process as its owner."""
    return f"{prefix}{pid_namespace()}.{os.getpid()}-"


def owner_of(name: str, prefix: str) -> Optional[int]:
    """The pid that made `name`, if it was made in this pid namespace (None: another one's,
    or not a name of ours)."""
    match = re.match(re.escape(prefix) + r"(?:(\d+)\.)?(\d+)-", name)
    if not match:
        return None
    namespace = match.group(1)
    if namespace is not None and int(namespace) != pid_namespace():
        return None
    return int(match.group(2))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def orphaned(name: str, prefix: str, age_seconds: float, max_age_seconds: float) -> bool:
    """Whether a leftover called `name` may be removed: its owner is gone, or it is too old."""
    owner = owner_of(name, prefix)
    return (owner is not None and not alive(owner)) or age_seconds >= max_age_seconds
