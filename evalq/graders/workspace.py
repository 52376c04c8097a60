"""Moving an agent's workspace safely: deterministic packing, and unpacking that refuses tricks.

Everything in an agent's workspace is hostile: only regular files and directories travel.
Symlinks, hard links, sockets, FIFOs, devices, unreadable entries, trees deeper than
MAX_DEPTH and names longer than MAX_NAME_CHARS are dropped, each named with its kind; packing
stores what it dropped in the archive (a pax global header), so the grade that unpacks it
names them too. No recursion and no path longer than MAX_NAME_CHARS below the root, however
the tree was built; unpacking treats the archive as hostile input as well.
"""

from __future__ import annotations

import io
import json
import os
import stat
import tarfile
import zlib
from pathlib import Path

from evalq.errors import EvalqError
from evalq.treewalk import MAX_DEPTH, MAX_NAME_CHARS, Entry, walk

MAX_WORKSPACE_BYTES = 256 * 1024 * 1024
MAX_ENTRIES = 100_000
#: dropped entries an archive names one by one; the rest are counted by kind
NAMED_DROPS = 50
DROPPED_KEY = "EVALQ.dropped"
#: tar headers and padding on top of the content an archive may carry once decompressed
TAR_OVERHEAD = 64 * 1024 * 1024
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


class WorkspaceTooLarge(EvalqError):
    """The workspace passes the size or entry limit: the attempt records it as its reason."""


class BadArchive(EvalqError):
    """A stored workspace archive is not a gzip'd tar evalq can read."""


def _kind(mode: int, nlink: int) -> str | None:
    """What a non-travelling entry is, or None for a regular file or directory that travels."""
    if stat.S_ISDIR(mode):
        return None
    if stat.S_ISREG(mode):
        return "hard link" if nlink > 1 else None
    return {stat.S_IFLNK: "symlink", stat.S_IFSOCK: "unix socket", stat.S_IFIFO: "FIFO",
            stat.S_IFCHR: "character device", stat.S_IFBLK: "block device"}.get(
        stat.S_IFMT(mode), "special file")


def _short(name: str) -> str:
    return name if len(name) <= 120 else f"{name[:56]}…{name[-56:]}"


class _Drops:
    """Dropped entries: the first NAMED_DROPS by name, all of them counted by kind."""

    def __init__(self) -> None:
        self.named: list[str] = []
        self.counts: dict[str, int] = {}

    def add(self, name: str, kind: str) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if len(self.named) < NAMED_DROPS:
            self.named.append(f"{_short(name)}: {kind} dropped")

    def listing(self) -> list[str]:
        rest = sum(self.counts.values()) - len(self.named)
        if rest <= 0:
            return list(self.named)
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.counts.items()))
        return [*self.named, f"{rest} more dropped (all drops by kind: {kinds})"]


def _tarinfo(name: str, *, size: int = 0, mode: int = 0o644, is_dir: bool = False):
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE if is_dir else tarfile.REGTYPE
    info.mode = 0o755 if is_dir else (0o755 if mode & stat.S_IXUSR else 0o644)
    info.size = size
    info.uid = info.gid = info.mtime = 0
    info.uname = info.gname = ""
    return info


def _read_regular(entry: Entry, room: int, limit: int) -> bytes | str:
    """The file's bytes, or the kind of problem that drops it (it changed, or is unreadable)."""
    st = entry.st
    too_large = WorkspaceTooLarge(f"workspace over {limit} bytes of files "
                                  f"(at {_short(entry.name)})")
    if st.st_size > room:  # a sparse file is refused before a byte of it is read
        raise too_large
    try:
        fd = os.open(entry.path, _OPEN_FLAGS)
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    with os.fdopen(fd, "rb") as handle:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            return "entry replaced while packing"
        data = handle.read(room + 1)
    if len(data) > room:
        raise too_large
    return data


def _drop_kind(entry: Entry) -> str | None:
    """Why an entry does not travel, or None when it does."""
    if entry.error is not None:
        return entry.error
    kind = _kind(entry.st.st_mode, entry.st.st_nlink)
    if kind == "symlink":
        try:
            return f"symlink to {_short(os.readlink(entry.path))}"
        except OSError:
            return kind
    if kind is None and len(entry.name) > MAX_NAME_CHARS:
        return f"path over {MAX_NAME_CHARS} characters"
    if kind is None and entry.cut:
        return f"directory deeper than {MAX_DEPTH} levels (with all it holds)"
    return kind


Member = tuple[tarfile.TarInfo, "bytes | None"]


def _collect(root: Path, drops: _Drops, limit: int) -> list[Member]:
    """Every travelling entry under root with its content, in the walk's order."""
    members: list[Member] = []
    total = 0
    for count, entry in enumerate(walk(root, MAX_DEPTH, MAX_NAME_CHARS)):
        if count >= MAX_ENTRIES:  # dropped ones count too: walking them costs as much
            raise WorkspaceTooLarge(f"workspace over {MAX_ENTRIES} entries")
        kind = _drop_kind(entry)
        if kind is not None:
            drops.add(entry.name, kind)
        elif entry.is_dir:
            members.append((_tarinfo(entry.name, is_dir=True), None))
        else:
            data = _read_regular(entry, limit - total, limit)
            if isinstance(data, str):
                drops.add(entry.name, data)
                continue
            total += len(data)
            members.append((_tarinfo(entry.name, size=len(data), mode=entry.st.st_mode), data))
    return members


def pack_workspace(root: Path, limit: int | None = None) -> bytes:
    """A gzip'd tar with sorted entries, zeroed owners and times: same tree, same bytes.

    Raises WorkspaceTooLarge past `limit` bytes of files or MAX_ENTRIES entries."""
    drops = _Drops()
    members = _collect(Path(root), drops, MAX_WORKSPACE_BYTES if limit is None else limit)
    headers = {DROPPED_KEY: json.dumps(drops.listing())} if drops.counts else {}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=6, format=tarfile.PAX_FORMAT,
                      pax_headers=headers) as archive:
        # The root first: a pax header must be followed by a member to be read back.
        archive.addfile(_tarinfo(".", is_dir=True))
        for info, data in members:
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def _inflate(data: bytes) -> bytes:
    """The tar inside a gzip stream, refused past the workspace limit (a decompression bomb)."""
    cap = MAX_WORKSPACE_BYTES + TAR_OVERHEAD
    inflater = zlib.decompressobj(wbits=31)
    try:
        out = inflater.decompress(data, cap + 1)
    except zlib.error as exc:
        raise BadArchive(f"workspace archive is not gzip data ({exc})") from exc
    if len(out) > cap or inflater.unconsumed_tail:
        raise BadArchive(f"workspace archive expands past {cap} bytes")
    return out


def _safe_parts(name: str) -> list[str] | str:
    """The path's parts inside the destination, or why it cannot go there."""
    if name.startswith("/") or "\0" in name:
        return "path escapes the workspace"
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        return "path escapes the workspace"
    if len(name) > MAX_NAME_CHARS:
        return f"path over {MAX_NAME_CHARS} characters"
    if len(parts) > MAX_DEPTH + 1:
        return f"deeper than {MAX_DEPTH} levels"
    return parts


def _member_kind(member: tarfile.TarInfo) -> str | None:
    if member.isreg() or member.isdir():
        return None
    if member.issym():
        return f"symlink to {_short(member.linkname)}"
    if member.islnk():
        return f"hard link to {_short(member.linkname)}"
    if member.isfifo():
        return "FIFO"
    if member.ischr():
        return "character device"
    if member.isblk():
        return "block device"
    return "special file"


def _extract(archive: tarfile.TarFile, member: tarfile.TarInfo, target: Path) -> str | None:
    """Write one member; returns why it was dropped, if it was."""
    try:
        if member.isdir():
            target.mkdir(parents=True, exist_ok=True)
            return None
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_dir():
            return "file where a directory already is"
        source = archive.extractfile(member)
        with open(target, "wb") as out:
            out.write(source.read() if source else b"")
        os.chmod(target, 0o755 if member.mode & stat.S_IXUSR else 0o644)
    except (OSError, ValueError) as exc:
        return f"cannot be written ({getattr(exc, 'strerror', None) or exc})"
    return None


def unpack_workspace(data: bytes, dest: Path) -> list[str]:
    """Extract regular files and directories only; returns what was dropped and why
    (at packing, as recorded in the archive, then here)."""
    drops = _Drops()
    dest.mkdir(parents=True, exist_ok=True)
    total = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(_inflate(data)), mode="r:") as archive:
            for count, member in enumerate(archive):
                if count >= MAX_ENTRIES:
                    drops.add("(rest of the archive)", f"entries past {MAX_ENTRIES}")
                    break
                if member.isdir() and member.name in (".", "./"):
                    continue  # the root itself
                why = _member_kind(member)
                parts = _safe_parts(member.name)
                why = why or (parts if isinstance(parts, str) else None)
                if why is None and member.isreg():
                    total += member.size
                    if total > MAX_WORKSPACE_BYTES:
                        why = f"past the {MAX_WORKSPACE_BYTES}-byte limit"
                why = why or _extract(archive, member, dest.joinpath(*parts))
                if why is not None:
                    drops.add(member.name, why)
            packed = archive.pax_headers.get(DROPPED_KEY)
    except tarfile.TarError as exc:
        raise BadArchive(f"workspace archive unreadable: {exc}") from exc
    return _recorded_drops(packed) + drops.listing()


def _recorded_drops(text: str | None) -> list[str]:
    """What packing dropped, as its archive says (hostile input too: strings only, capped)."""
    if not text:
        return []
    try:
        items = json.loads(text)
    except ValueError:
        return ["(the archive's list of dropped entries is unreadable)"]
    if not isinstance(items, list):
        return []
    return [str(i)[:400] for i in items[:NAMED_DROPS + 1]]


def copy_workspace(src: Path, dest: Path) -> list[str]:
    """Copy a live directory the same careful way (pack, then unpack)."""
    return unpack_workspace(pack_workspace(src), dest)
