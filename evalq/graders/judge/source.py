"""Static checks of the agent's source, in the judge: its copy of the workspace as handed in.

The grader copies the workspace's files (EVALQ_SOURCE_DIR, read-only) before the subject
starts, so what is read here is what the agent left, whatever its code does once loaded:
`inspect.getsource` in the subject gave the source that code chose to show. Files over 1 MB,
and those past the copy's caps (16 MB, 5,000 files, smallest first), are not in the copy.
"""

from __future__ import annotations

import ast
import os
import stat
from pathlib import PurePosixPath

SOURCE_ENV = "EVALQ_SOURCE_DIR"
#: the most source parsed into a tree at once (parsing takes ~100x a text's size in memory)
MAX_PARSE_CHARS = 1024 * 1024
_OPEN = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class SourceMissing(AssertionError):
    """The file is not in the judge's copy: the check that needs it fails."""


def source_root() -> str:
    where = os.environ.get(SOURCE_ENV)
    if not where:
        raise RuntimeError("no copy of the workspace: run these tests through the evalq grader")
    return where


def source_text(path: str) -> str:
    """A file of the workspace as the agent left it (`path` relative to its top)."""
    parts = PurePosixPath(path).parts
    if not parts or PurePosixPath(path).is_absolute() or any(p in (".", "..") for p in parts):
        raise ValueError(f"{path!r}: give a path relative to the workspace's top")
    full = os.path.join(source_root(), *parts)
    try:
        fd = os.open(full, _OPEN)
    except (FileNotFoundError, NotADirectoryError):
        raise SourceMissing(f"{path} is not in the workspace (or was over the copy's caps: "
                            "1 MB a file, 16 MB in all)") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SourceMissing(f"{path} is not a file")
        data = handle.read()
    return data.decode("utf-8", "replace")


def module_path(module: str) -> str:
    """Where the Python module `module` (dotted) lives in the workspace: NAME.py, or
    NAME/__init__.py for a package; SourceMissing when neither is there."""
    base = "/".join(module.split("."))
    for candidate in (f"{base}.py", f"{base}/__init__.py"):
        if os.path.isfile(os.path.join(source_root(), candidate)):
            return candidate
    raise SourceMissing(f"module {module} is not in the workspace ({base}.py or "
                        f"{base}/__init__.py)")


def module_source(module: str) -> str:
    """The source of a Python module of the workspace, as `inspect.getsource(module)` would
    give it had nothing replaced `inspect`."""
    return source_text(module_path(module))


def source_tree(path_or_module: str) -> ast.Module:
    """The parsed source (`ast`) of a workspace file ("pkg/mod.py") or module ("pkg.mod");
    source that does not parse, or is too large or deep to, fails the check."""
    path = path_or_module if path_or_module.endswith(".py") else module_path(path_or_module)
    text = source_text(path)
    if len(text) > MAX_PARSE_CHARS:
        raise SourceMissing(f"{path} is over {MAX_PARSE_CHARS} characters; not parsed")
    try:
        return ast.parse(text, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise SourceMissing(f"{path} does not parse: {type(exc).__name__}: "
                            f"{str(exc)[:200]}") from None
