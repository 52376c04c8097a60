"""A task's own environment as an agent sandbox's root, instead of the worker's toolchain.

A fixture imported from a task folder with an environment (a Harbor task) is solved in that
environment: bubblewrap shows the environment's exported tree read-only as the root (its
digest pinned by the fixture), Docker runs the image imported from that very tree. The
workspace is shown at the environment's working folder (and at its host path, as in every
run), the agent starts there, and everything else of the tree is read-only: only the
workspace is carried to the verifier, so nothing else the agent could change would count.
What evalq adds stays as in every sealed run: the profile, the agent's own install and
source read-only at their usual places, the generated /etc files, fresh /tmp, /dev and /proc,
and the door as the only way out.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Iterable, Optional

#: made fresh by every sandbox: never taken from the tree
FRESH = ("proc", "dev", "tmp", "sys")


@dataclass(frozen=True)
class TaskRoot:
    """Where a task's environment is on this worker, checked against its pinned digest."""

    #: the local Docker image imported from the tree
    image: str
    #: the pinned rootfs digest the tree and the image carry
    digest: str
    #: where the environment keeps the workspace: the agent's working folder
    workdir: str
    #: the environment's own variables (its image's ENV)
    env: dict[str, str] = field(default_factory=dict)
    #: the exported tree (bubblewrap); None where only the image is looked up
    tree: Optional[Path] = None


def _under(path: PurePosixPath, folder: PurePosixPath) -> bool:
    return path == folder or folder in path.parents


def tree_binds(tree: Path, targets: Iterable[str]) -> list[str]:
    """bwrap options showing `tree` read-only as the root, around the mount `targets`.

    A top-level entry of the tree is bound read-only whole unless a target lies inside it:
    then it is made a folder of the sandbox's own root and its entries are shown one by one
    the same way (a read-only bind cannot take a new mount point), or none when others may
    not pass it (an image's /root): the agent's uid could not read them, and bubblewrap run
    as that uid could not bind them. An entry that is itself a target is left to that
    target's mount; /proc, /dev, /tmp and /sys are made fresh."""
    wanted = [PurePosixPath(t) for t in targets]
    args: list[str] = []

    def show(folder: Path, inside: PurePosixPath) -> None:
        for entry in sorted(folder.iterdir(), key=lambda e: e.name):
            here = inside / entry.name
            if inside == PurePosixPath("/") and entry.name in FRESH:
                continue
            if here in wanted:
                continue
            holds = [t for t in wanted if _under(t, here)]
            mode = os.lstat(entry).st_mode
            if stat.S_ISLNK(mode) and not holds:
                args.extend(["--symlink", os.readlink(entry), str(here)])
            elif stat.S_ISDIR(mode) and holds:
                args.extend(["--perms", "0755", "--dir", str(here)])
                if mode & stat.S_IXOTH:  # else an empty stand-in, as Docker's (closed_folders)
                    show(entry, here)
            elif (stat.S_ISDIR(mode) or stat.S_ISREG(mode)) and not holds:
                args.extend(["--ro-bind", str(entry), str(here)])
            # sockets, devices, fifos of the image, and a link on a target's way: left out

    show(tree, PurePosixPath("/"))
    return args


def closed_folders(tree: Optional[Path], targets: Iterable[str]) -> list[str]:
    """Folders of the tree on a mount target's way that others may not pass (an image's
    /root is 0700): the agent's uid could not reach what is mounted below them, so Docker
    puts an empty passable folder there (bubblewrap's tree_binds makes one too)."""
    if tree is None:
        return []
    found: list[str] = []
    for target in targets:
        for folder in reversed(PurePosixPath(target).parents):
            if folder == PurePosixPath("/"):
                continue
            try:
                mode = os.lstat(tree / str(folder).lstrip("/")).st_mode
            except OSError:
                break  # not in the tree: the engine makes it, passable
            if not stat.S_ISDIR(mode):
                break
            if not mode & stat.S_IXOTH and str(folder) not in found:
                found.append(str(folder))
                break
    return found


def in_tree(tree: Path, path: str) -> bool:
    """Whether `path` names a file of the tree (its links resolved inside the tree)."""
    current = PurePosixPath("/")
    parts = list(PurePosixPath(path).parts[1:])
    for _ in range(64):  # links followed at most this often
        if not parts:
            return os.path.isfile(tree / str(current).lstrip("/"))
        part = parts.pop(0)
        candidate = tree / str(current / part).lstrip("/")
        if os.path.islink(candidate):
            link = PurePosixPath(os.readlink(candidate))
            parts = list(link.parts[1:] if link.is_absolute() else link.parts) + parts
            if link.is_absolute():
                current = PurePosixPath("/")
            continue
        if part == "..":
            current = current.parent
        elif part != ".":
            current = current / part
    return False


def agent_env(root: TaskRoot, env: dict[str, str]) -> dict[str, str]:
    """The agent's environment in the task's: the environment's own variables, then the
    run's (its profile, its placeholders); PATH is the environment's, then the run's own
    folders not in it, so the task's tools come first."""
    merged = {**root.env, **env}
    own = root.env.get("PATH")
    if own:
        first = own.split(":")
        merged["PATH"] = ":".join(first + [p for p in env.get("PATH", "").split(":")
                                           if p and p not in first])
    return merged
