"""The run's diff against the fixture's initial workspace, as a unified diff (SPEC R4)."""

from __future__ import annotations

import difflib
from pathlib import Path

from evalq.treewalk import walk

MAX_DIFF_CHARS = 2_000_000


def _files(root: Path, single_links: bool = False) -> dict[str, Path]:
    """Regular files (no link, FIFO or device: reading those could hang or leave the tree).
    With `single_links` (the agent's tree), only those the workspace archive carries: a hard
    link is dropped there, and a thousand links to one huge sparse file would be read here a
    thousand times, past every size limit."""
    return {e.name: Path(e.path) for e in walk(root)
            if e.is_regular and (not single_links or e.st.st_nlink == 1)}


def _text(path: Path | None) -> list[str] | None:
    if path is None:
        return []
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", "replace").splitlines(keepends=True)


def workspace_diff(before: Path, after: Path) -> str:
    old, new = _files(before), _files(after, single_links=True)
    chunks: list[str] = []
    size = 0
    for rel in sorted(set(old) | set(new)):
        a, b = old.get(rel), new.get(rel)
        if a is not None and b is not None and a.read_bytes() == b.read_bytes():
            continue
        a_lines, b_lines = _text(a), _text(b)
        if a_lines is None or b_lines is None:
            chunk = f"Binary files a/{rel} and b/{rel} differ\n"
        else:
            chunk = "".join(difflib.unified_diff(
                a_lines, b_lines, fromfile=f"a/{rel}" if a else "/dev/null",
                tofile=f"b/{rel}" if b else "/dev/null"))
        size += len(chunk)
        if size > MAX_DIFF_CHARS:
            chunks.append(f"... diff truncated at {MAX_DIFF_CHARS} characters\n")
            break
        chunks.append(chunk)
    return "".join(chunks)
