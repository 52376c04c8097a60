"""What an agent may see read-only besides the toolchain: its own install, found from its
executable, and nothing that holds the host's answers.

An npm-installed CLI needs its prefix (the folder above `node_modules`), a Python tool its
virtualenv and the interpreter that virtualenv was made from; code that imports evalq needs
the interpreter, its virtualenv and the `evalq/` package folder only, never the checkout
around it with `fixtures/` beside it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterable

from evalq.errors import InfrastructureError

#: the host's toolchain, shown read-only (grading uses a built rootfs instead; agents run the
#: toolchain their worker has, with their own installed files beside it)
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = ("/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
             "/etc/localtime", "/etc/mime.types")


def host_toolchain_binds() -> list[str]:
    """bwrap options showing the host's system folders read-only (symlinks kept as links)."""
    args: list[str] = []
    for path in SYSTEM_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


def _in_toolchain(path: Path) -> bool:
    return any(path == Path(d) or Path(d) in path.parents for d in SYSTEM_DIRS)


def _venv_paths(venv: Path) -> list[Path]:
    """A virtualenv and the prefix of the interpreter it was made from (pyvenv.cfg `home`)."""
    found = [venv]
    for line in (venv / "pyvenv.cfg").read_text(errors="replace").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            found.append(Path(os.path.realpath(value.strip())).parent)
    return found


def install_paths(executable: str) -> list[Path]:
    """The folders an installed agent runs from: its npm prefix or virtualenv, else the file."""
    found: list[Path] = []
    for candidate in dict.fromkeys((Path(executable), Path(os.path.realpath(executable)))):
        prefix = None
        for parent in candidate.parents:
            if (parent / "pyvenv.cfg").is_file():
                found += _venv_paths(parent)
                prefix = parent
                break
            if parent.name == "node_modules":
                prefix = parent.parent  # keep climbing: the topmost node_modules wins
        if prefix is None:
            found.append(candidate)
        elif prefix not in found:
            found.append(prefix)
    return visible(found)


def evalq_python_paths() -> list[Path]:
    """What `sys.executable -m evalq.…` needs: the interpreter, its venv, the evalq package."""
    import evalq

    paths = [Path(sys.prefix), Path(sys.base_prefix), Path(evalq.__file__).resolve().parent]
    return visible(paths)


def visible(paths: Iterable[Path]) -> list[Path]:
    """Existing paths not already in the toolchain, without duplicates, in order."""
    out: list[Path] = []
    for path in paths:
        path = Path(os.path.abspath(path))
        if path.exists() and not _in_toolchain(path) and path not in out:
            out.append(path)
    return out


def refuse_exposing(readonly: Iterable[Path], protected: Iterable[Path],
                    evalq_home: Path | None = None, allowed: Iterable[Path] = ()) -> None:
    """Refuse a read-only path that would show a protected folder (EVALQ_HOME, the worker's
    HOME, a checkout with fixtures) by being that folder or one above it, or that lies inside
    EVALQ_HOME (its database, artifacts, fixture cache, other runs) unless it is `allowed`
    (the one solution overlay the scripted agent applies)."""
    guarded = [Path(os.path.realpath(p)) for p in protected]
    home = Path(os.path.realpath(evalq_home)) if evalq_home is not None else None
    exempt = {Path(os.path.realpath(p)) for p in allowed}
    for path in readonly:
        real = Path(os.path.realpath(path))
        if home is not None and home in real.parents and real not in exempt:
            raise InfrastructureError(
                f"the agent sandbox would expose {path}, inside EVALQ_HOME {home}; "
                "install the agent outside it")
        for folder in guarded:
            if real == folder or real in folder.parents:
                raise InfrastructureError(
                    f"the agent sandbox would expose {folder} through the read-only path "
                    f"{path}; install the agent outside it (its own prefix or virtualenv)")


def protected_folders(evalq_home: Path) -> list[Path]:
    """Folders no declared path may expose: EVALQ_HOME, the worker's HOME, the checkout."""
    import evalq

    folders = [evalq_home, Path.home()]
    checkout = Path(evalq.__file__).resolve().parent.parent
    if (checkout / "fixtures").is_dir() or (checkout / ".git").exists():
        folders.append(checkout)
    return folders
