"""A fresh, isolated profile per run: HOME, XDG dirs and TMPDIR of its own, a minimal environment.

No two runs share any of these directories, so nothing an agent writes into its profile is
visible to the next run.

The profile (workspace included) is the one place a sealed agent writes to the host, and a
per-file size limit does not bound file after file: where the worker may mount (root with
CAP_SYS_ADMIN), a run's profile is a tmpfs of `disk_mb` (pages charged to the memory cgroup
of whoever writes them), so an agent cannot fill the disk that holds EVALQ_HOME, its database
and every other run. Elsewhere it is a plain folder, and the worker's log says so.
"""

from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from evalq.graders.sandbox.cleanup import remove_tree
from evalq.graders.sandbox.privilege import mount_refused
from evalq.graders.sandbox.scratch import mount_tmpfs, unmount

#: the source name of profile tmpfs mounts (how a sweep knows them)
PROFILE_SOURCE = "evalq-run"
#: files and folders a capped profile may hold (an archive carries 100,000 entries at most)
PROFILE_INODES = 400_000

#: Variables an agent process gets from evalq itself; nothing else of the worker's environment.
BASE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "NO_COLOR": "1",
    "TERM": "dumb",
    "CI": "true",
    "DO_NOT_TRACK": "1",
}


@dataclass
class Profile:
    root: Path
    home: Path
    tmp: Path
    workspace: Path
    logs: Path
    env: dict[str, str] = field(default_factory=dict)
    #: whether the root is a size-capped tmpfs of its own
    capped: bool = False

    def cleanup(self) -> None:
        """Remove the run root, however deep a tree the agent left (no recursion, no traceback)."""
        if self.capped:
            unmount(self.root)  # everything in it goes with the tmpfs
        left = remove_tree(self.root)
        if left:
            logging.getLogger("evalq.worker").warning("profile %s not fully removed: %s",
                                                      self.root, "; ".join(left))


def cap_folder(folder: Path, disk_mb: int, inodes: int = PROFILE_INODES) -> str | None:
    """Mount a tmpfs of `disk_mb` and `inodes` on the empty `folder`; None when it is
    mounted, else why not (mounting needs CAP_SYS_ADMIN). Empty files cost no bytes, but each
    is an inode and a dentry of kernel memory (not charged to a cgroup v1 memory limit):
    without a count, millions of them could be."""
    refused = mount_refused()
    if refused is not None:
        return refused
    options = f"size={int(disk_mb)}m,nr_inodes={int(inodes)},mode=0700"
    why = mount_tmpfs(folder, PROFILE_SOURCE, options)
    return None if why is None else f"tmpfs mount failed: {why}"


def new_profile(base_dir: Path | None = None, extra_env: dict[str, str] | None = None,
                path_prefix: list[str] | None = None,
                disk_mb: int | None = None, inodes: int = PROFILE_INODES) -> Profile:
    """Make a new run root with home/, tmp/, logs/ and an empty workspace path beside them;
    with `disk_mb`, the root is a tmpfs of that size (with CAP_SYS_ADMIN; else uncapped, and
    logged)."""
    if base_dir is not None:
        base_dir.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="evalq-run-", dir=base_dir))
    why = cap_folder(root, disk_mb, inodes) if disk_mb is not None else None
    capped = disk_mb is not None and why is None
    if why is not None:
        logging.getLogger("evalq.worker").warning(
            "profile %s has no total disk cap (%s)", root, why)
    home, tmp, logs = root / "home", root / "tmp", root / "logs"
    for folder in (home, tmp, logs):
        folder.mkdir()
    xdg = {"XDG_CONFIG_HOME": home / ".config", "XDG_CACHE_HOME": home / ".cache",
           "XDG_DATA_HOME": home / ".local" / "share", "XDG_STATE_HOME": home / ".local" / "state"}
    for folder in xdg.values():
        folder.mkdir(parents=True)
    env = dict(BASE_ENV)
    if path_prefix:
        env["PATH"] = os.pathsep.join([*path_prefix, env["PATH"]])
    env.update({"HOME": str(home), "TMPDIR": str(tmp), "TMP": str(tmp), "TEMP": str(tmp),
                **{k: str(v) for k, v in xdg.items()}})
    env.update(extra_env or {})
    return Profile(root=root, home=home, tmp=tmp, workspace=root / "workspace", logs=logs, env=env,
                   capped=capped)
