"""Moving an agent's workspace safely: deterministic packing, and unpacking that refuses tricks.

Everything in an agent's workspace is hostile: symlinks, hard links, devices and paths that
escape are dropped (and named) before any grader runs.
"""

from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path

MAX_WORKSPACE_BYTES = 256 * 1024 * 1024


class WorkspaceTooLarge(Exception):
    pass


def pack_workspace(root: Path, limit: int = MAX_WORKSPACE_BYTES) -> bytes:
    """A gzip'd tar with sorted entries, zeroed owners and times: same tree, same bytes."""
    buffer = io.BytesIO()
    total = 0
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=6) as archive:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(dirnames + filenames):
                path = Path(dirpath) / name
                info = archive.gettarinfo(str(path), arcname=path.relative_to(root).as_posix())
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = 0
                if info.isreg():
                    total += info.size
                    if total > limit:
                        raise WorkspaceTooLarge(f"workspace over {limit} bytes")
                    with open(path, "rb") as handle:
                        archive.addfile(info, handle)
                elif info.isdir() or info.issym():
                    archive.addfile(info)
    return buffer.getvalue()


def unpack_workspace(data: bytes, dest: Path) -> list[str]:
    """Extract regular files and directories only; returns what was dropped and why."""
    dropped: list[str] = []
    dest.mkdir(parents=True, exist_ok=True)
    base = dest.resolve()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as archive:
        for member in archive:
            name = member.name
            target = (base / name).resolve()
            if name.startswith("/") or (target != base and base not in target.parents):
                dropped.append(f"{name}: path escapes the workspace")
                continue
            if member.issym() or member.islnk():
                dropped.append(f"{name}: link to {member.linkname} dropped")
                continue
            if not (member.isreg() or member.isdir()):
                dropped.append(f"{name}: special file dropped")
                continue
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            source = archive.extractfile(member)
            with open(target, "wb") as out:
                out.write(source.read())
            os.chmod(target, 0o755 if member.mode & stat.S_IXUSR else 0o644)
    return dropped


def copy_workspace(src: Path, dest: Path) -> list[str]:
    """Copy a live directory the same careful way (pack, then unpack)."""
    return unpack_workspace(pack_workspace(src), dest)
