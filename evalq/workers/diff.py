"""The run's diff against the fixture's initial workspace, as a unified diff.

The agent's tree is hostile data: its names are shown escaped (a byte that is not UTF-8, a
newline or an escape sequence in a name would otherwise break the text or the diff's own
lines), a file it left unreadable is named as such, and a file too large to compare line by
line (difflib's time grows with the product of the two lengths) is named with its sizes.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from evalq.plaintext import escaped_name
from evalq.treewalk import walk
from evalq.workers.redact import read_regular

MAX_DIFF_CHARS = 2_000_000
#: the largest file compared line by line
MAX_DIFF_FILE_BYTES = 1024 * 1024
#: the most bytes of one file read to tell whether it changed (beyond: "differ", by size)
MAX_READ_BYTES = 256 * 1024 * 1024


def _files(root: Path, single_links: bool = False) -> dict[str, str]:
    """Regular files (no link, FIFO or device: reading those could hang or leave the tree).
    With `single_links` (the agent's tree), only those the workspace archive carries: a hard
    link is dropped there, and a thousand links to one huge sparse file would be read here a
    thousand times, past every size limit."""
    return {e.name: e.path for e in walk(root)
            if e.is_regular and (not single_links or e.st.st_nlink == 1)}


def _lines(data: bytes) -> list[str] | None:
    """The text's lines, or None for a binary file."""
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", "replace").splitlines(keepends=True)


def _chunk(rel: str, a: str | None, b: str | None) -> str | None:
    """One file's part of the diff, or None when it did not change."""
    name = escaped_name(rel)
    old = b"" if a is None else read_regular(a, MAX_READ_BYTES)
    new = b"" if b is None else read_regular(b, MAX_READ_BYTES)
    if old is None or new is None:
        return f"Unreadable file b/{name} (not compared)\n"
    if a is not None and b is not None and old == new:
        return None
    if max(len(old), len(new)) > MAX_DIFF_FILE_BYTES:
        return (f"Files a/{name} and b/{name} differ ({len(old)} and {len(new)} bytes, "
                "too large to compare line by line)\n")
    a_lines, b_lines = _lines(old), _lines(new)
    if a_lines is None or b_lines is None:
        return f"Binary files a/{name} and b/{name} differ\n"
    return "".join(difflib.unified_diff(
        a_lines, b_lines, fromfile=f"a/{name}" if a else "/dev/null",
        tofile=f"b/{name}" if b else "/dev/null"))


def workspace_diff(before: Path, after: Path) -> str:
    """The diff as text that encodes as UTF-8 whatever the agent named its files."""
    old, new = _files(before), _files(after, single_links=True)
    chunks: list[str] = []
    size = 0
    for rel in sorted(set(old) | set(new)):
        chunk = _chunk(rel, old.get(rel), new.get(rel))
        if chunk is None:
            continue
        size += len(chunk)
        if size > MAX_DIFF_CHARS:
            chunks.append(f"... diff truncated at {MAX_DIFF_CHARS} characters\n")
            break
        chunks.append(chunk)
    return "".join(chunks)
