"""The few git questions freezing an agent source asks: which commit, which files, what changed.

Each is one `git` command on the user's repository; a failure is the user's to fix (not a
repository, an unknown commit), so it comes back as a UserError naming the manifest field.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Optional

from evalq.errors import UserError

#: git must not ask for anything or page its output
GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "LC_ALL": "C"}


def git(folder: Path, *args: str, where: str = "", binary: bool = False):
    """Run `git -C folder ARGS`; stdout (text, or bytes with binary); a UserError on failure."""
    try:
        done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True,
                              env={**os.environ, **GIT_ENV}, timeout=300)
    except FileNotFoundError:
        raise UserError("git is not installed", field=where or None,
                        fix="install git (apt-get install -y git)") from None
    if done.returncode != 0:
        why = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise UserError(f"git {args[0]} failed in {folder}: {why[-1] if why else 'no reason'}",
                        field=where or None, fix="check the repository and the commit")
    return done.stdout if binary else done.stdout.decode("utf-8", "replace")


def top_level(folder: Path) -> Optional[Path]:
    """The work tree `folder` lies in, or None when it is in none."""
    try:
        done = subprocess.run(["git", "-C", str(folder), "rev-parse", "--show-toplevel"],
                              capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        return None
    return Path(done.stdout.strip()).resolve() if done.returncode == 0 else None


def resolve_commit(repo: Path, name: str, where: str = "") -> str:
    """The full commit id `name` (a tag, branch, abbreviated id) names in `repo` now."""
    return git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options",
               f"{name}^{{commit}}", where=where).strip()


def is_folder(repo: Path, commit: str, subdir: str) -> bool:
    """Whether the commit holds the folder `subdir` (relative to the top level)."""
    try:
        kind = git(repo, "cat-file", "-t", f"{commit}:{subdir}").strip()
    except UserError:
        return False
    return kind == "tree"


def head(repo: Path) -> Optional[str]:
    """The checked-out commit, or None (a repository with no commit yet)."""
    try:
        return resolve_commit(repo, "HEAD")
    except UserError:
        return None


def changed_files(repo: Path, pathspec: Optional[Path] = None, untracked: bool = False,
                  where: str = "") -> list[str]:
    """Paths (relative to the work tree's top) with uncommitted changes, staged or not;
    with `untracked`, also files git does not track and does not ignore (a folder of them
    as `folder/`)."""
    args = ["status", "--porcelain=v1", "-z",
            f"--untracked-files={'normal' if untracked else 'no'}"]
    if pathspec is not None:
        args += ["--", str(pathspec)]
    out = git(repo, *args, where=where)
    paths, entries = [], out.split("\0")
    skip = False
    for entry in entries:
        if skip:  # the source path of a rename or copy
            skip = False
            continue
        if len(entry) > 3:
            paths.append(entry[3:])
            skip = entry[0] in "RC"
    return paths


def listed_files(folder: Path, where: str = "") -> list[str]:
    """Files under `folder`, relative to it, that git tracks or would track: tracked and
    untracked ones, ignored ones left out."""
    out = git(folder, "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--",
              ".", where=where)
    return sorted({name for name in out.split("\0") if name})


def archive(repo: Path, tree: str, where: str = "") -> bytes:
    """A commit's tree (`ID`) or a folder of it (`ID:path`) as a gzip'd tar (`git archive`)."""
    return git(repo, "archive", "--format=tar.gz", tree, where=where, binary=True)
