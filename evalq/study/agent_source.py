"""A condition's agent source is a frozen input: exported, digested into the lock, published.

`source = { path = "agents/" }` is a folder; `source = { repo = ".", commit = "v2" }` a commit
of a git repository (its whole tree, or the folder `path` names in it: `git archive` of the
resolved commit id); both relative to the manifest. The export is digested like a fixture, so a changed folder or a tag that now
names another commit is refused by the lock check; workers get the exported tree from the
artifact store (evalq/workers/agent_source.py) and mount it read-only.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

from evalq.artifacts import ArtifactStore
from evalq.digest import tree_digest
from evalq.errors import UserError
from evalq.fixtures.archive import pack_workspace, unpack_workspace
from evalq.models import AgentSource
from evalq.study import git
from evalq.study.paths import lock_path_for

#: left out of a folder outside any git repository (inside one, git's ignore rules decide)
SKIPPED = {".git", "__pycache__"}
#: changed files named in the dirty-tree message; the rest are counted
NAMED_CHANGES = 3


@dataclass(frozen=True)
class SourceSpec:
    """Where a condition's source is on this machine, and what the manifest asked for."""

    condition: str
    field: str  # the manifest field, for messages: conditions.N.source
    manifest: Path
    folder: Path  # the folder, or the repository's top level
    commit: Optional[str] = None  # the commit name as written (a repository source)
    #: a repository source's folder, relative to the top level (None: the whole tree)
    subdir: Optional[str] = None

    @property
    def is_commit(self) -> bool:
        return self.commit is not None


def resolve_source(source: AgentSource, manifest: Path, index: int, condition: str) -> SourceSpec:
    """Check the source exists (the folder; the repository and the commit in it)."""
    where = f"conditions.{index}.source"
    base = manifest.parent
    if source.repo is None:
        folder = (base / source.path).resolve()
        if not folder.is_dir():
            raise UserError(f"agent source '{source.path}' is not a folder ({folder})",
                            file=manifest, field=f"{where}.path",
                            fix="give a folder relative to the manifest")
        return SourceSpec(condition, where, manifest, folder)
    repo = (base / source.repo).resolve()
    top = git.top_level(repo) if repo.is_dir() else None
    if top is None:
        raise UserError(f"'{source.repo}' is not in a git repository ({repo})", file=manifest,
                        field=f"{where}.repo",
                        fix="give a folder of a git repository relative to the manifest")
    subdir = None
    if source.path is not None:
        inside = (repo / source.path).resolve()
        if inside != top and top not in inside.parents:
            raise UserError(f"'{source.path}' is outside the repository {top}", file=manifest,
                            field=f"{where}.path", fix="give a folder of the repository, "
                                                       "relative to `repo`")
        subdir = inside.relative_to(top).as_posix() if inside != top else None
    spec = SourceSpec(condition, where, manifest, top, source.commit, subdir)
    try:
        commit = git.resolve_commit(top, source.commit)
    except UserError:
        raise UserError(f"commit '{source.commit}' is not in the repository {top}",
                        file=manifest, field=f"{where}.commit",
                        fix="give a tag, branch or commit id of that repository") from None
    if subdir is not None and not git.is_folder(top, commit, subdir):
        raise UserError(f"commit '{source.commit}' has no folder '{subdir}'", file=manifest,
                        field=f"{where}.path", fix="give a folder that commit holds")
    return spec


@dataclass(frozen=True)
class Exported:
    digest: str
    #: the resolved commit id (a repository source), else None
    commit: Optional[str]


def _refuse(spec: SourceSpec, message: str, fix: str) -> UserError:
    return UserError(message, file=spec.manifest, field=spec.field, fix=fix)


def _copy_file(spec: SourceSpec, src: Path, dest: Path) -> None:
    mode = src.lstat().st_mode
    if not stat.S_ISREG(mode):
        raise _refuse(spec, f"agent source file {src} is not a regular file (a link or "
                            "special file)", "replace it with a regular file, or ignore it in git")
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dest, follow_symlinks=False)
    os.chmod(dest, 0o755 if mode & stat.S_IXUSR else 0o644)


def _folder_files(folder: Path) -> list[str]:
    """Every file under a folder outside git, but SKIPPED folders, relative to it."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED)
        for name in filenames:
            found.append(str((Path(dirpath) / name).relative_to(folder)))
    return sorted(found)


def export_source(spec: SourceSpec, into: Path) -> Exported:
    """Write the source's tree into the empty folder `into` and digest it.

    A commit: `git archive` of the id it resolves to now. A folder: a copy of the files git
    tracks or would track there (ignored files left out), or, outside a repository, of every
    file but SKIPPED folders. Links and special files are refused: they would point outside.
    """
    commit = None
    if spec.is_commit:
        commit = git.resolve_commit(spec.folder, spec.commit, where=spec.field)
        tree = f"{commit}:{spec.subdir}" if spec.subdir else commit
        dropped = unpack_workspace(git.archive(spec.folder, tree, where=spec.field), into)
        if dropped:
            raise _refuse(spec, f"commit {commit[:12]} holds what evalq does not copy: "
                                f"{dropped[0]}", "keep only regular files in the agent's source")
    else:
        top = git.top_level(spec.folder)
        names = git.listed_files(spec.folder, spec.field) if top else \
            _folder_files(spec.folder)
        foreign = _not_the_agents(spec, spec.folder)
        for name in (n for n in names if not foreign(n)):
            src = spec.folder / name
            if src.is_symlink() or src.exists():  # a tracked file deleted in the work tree: gone
                _copy_file(spec, src, into / name)
    into.mkdir(parents=True, exist_ok=True)  # nothing copied: the refusal below, not a crash
    if not any(into.iterdir()):
        ignored = " (the repository around it ignores every file there)" \
            if not spec.is_commit and top and not names else ""
        raise _refuse(spec, f"the agent source of condition '{spec.condition}' has no "
                            f"files{ignored}",
                      "name the folder or commit that holds the agent's code")
    _refuse_fixtures(spec, into)
    return Exported(digest=tree_digest(into), commit=commit)


def _refuse_fixtures(spec: SourceSpec, tree: Path) -> None:
    """A fixture in the agent's source would show the agent its hidden tests and solutions."""
    from evalq.fixtures.fixture import MANIFEST

    for found in sorted(tree.rglob(MANIFEST)):
        folder = found.parent
        if (folder / "hidden").is_dir() or (folder / "solutions").is_dir():
            where = folder.relative_to(tree).as_posix()
            raise _refuse(spec, f"the agent source holds a fixture ({where}/): the agent would "
                                "see its hidden tests and solutions",
                          "keep fixtures out of the agent's source, or name the agent's own "
                          "folder with `path`")


@contextmanager
def exported(spec: SourceSpec) -> Iterator[tuple[Path, Exported]]:
    """The exported tree in a temporary folder, removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="evalq-agent-source-"))
    try:
        yield folder, export_source(spec, folder / "tree")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def lock_entries(sources: dict[str, SourceSpec]) -> dict[str, dict]:
    """For the lock (inside its digest): condition -> {digest} and, for a commit, the name
    written and the commit id it resolved to."""
    entries: dict[str, dict] = {}
    for condition, spec in sorted(sources.items()):
        with exported(spec) as (_, done):
            entry = {"digest": done.digest}
            if spec.is_commit:
                entry.update(commit=done.commit, name=spec.commit)
                if spec.subdir:
                    entry["path"] = spec.subdir
            entries[condition] = entry
    return entries


def _not_the_agents(spec: SourceSpec, top: Path):
    """Whether a path relative to `top` is the study's, not the agent's: its manifest, its
    lock, or anything in EVALQ_HOME (by default ./.evalq, often inside the repository)."""
    from evalq.config import load_settings

    top = top.resolve()
    files = {Path(p).resolve() for p in (spec.manifest, lock_path_for(spec.manifest))}
    home = Path(load_settings().home).resolve()

    def foreign(rel: str) -> bool:
        path = top / rel
        return path in files or path == home or home in path.parents

    return foreign


def checkout_states(sources: dict[str, SourceSpec]) -> dict[str, dict]:
    """For the lock (outside its digest): condition -> {head, dirty}. `head` is the checked-out
    commit of a folder's repository (None outside one); `dirty` the uncommitted changes that
    concern the source: a commit's repository's changed tracked files, a folder's changed
    and untracked files (the study's own manifest, lock and EVALQ_HOME are not counted)."""
    states: dict[str, dict] = {}
    for condition, spec in sorted(sources.items()):
        top = spec.folder if spec.is_commit else git.top_level(spec.folder)
        if top is None:
            states[condition] = {"head": None, "dirty": []}
            continue
        changed = git.changed_files(top, None if spec.is_commit else spec.folder,
                                    untracked=not spec.is_commit, where=spec.field)
        foreign = _not_the_agents(spec, top)
        state = {"dirty": sorted(p for p in changed if not foreign(p))}
        if not spec.is_commit:
            state["head"] = git.head(top)
        states[condition] = state
    return states


def refuse_dirty(sources: dict[str, SourceSpec], states: dict[str, dict]) -> None:
    """One line for the first source with uncommitted changes, naming the fix."""
    for condition, spec in sources.items():  # in the manifest's order
        dirty = (states.get(condition) or {}).get("dirty") or []
        if not dirty:
            continue
        named = ", ".join(dirty[:NAMED_CHANGES])
        more = f" and {len(dirty) - NAMED_CHANGES} more" if len(dirty) > NAMED_CHANGES else ""
        top = spec.folder if spec.is_commit else git.top_level(spec.folder)
        raise _refuse(spec, f"the agent source's repository {top} has uncommitted changes "
                            f"({named}{more})", "commit or stash them, or pass --allow-dirty "
                                                "to freeze as it is (the lock records it)")


def publish_sources(store: ArtifactStore, sources: dict[str, SourceSpec],
                    locked: dict[str, dict]) -> dict[str, dict[str, str]]:
    """condition -> {digest, ref}: each source exported again, checked against the lock, and
    put in the artifact store for workers."""
    published: dict[str, dict[str, str]] = {}
    for condition, spec in sorted(sources.items()):
        with exported(spec) as (folder, done):
            if done.digest != (locked.get(condition) or {}).get("digest"):
                raise _refuse(spec, f"the agent source of condition '{condition}' changed since "
                                    "the study was frozen", "restore it, or freeze a new study "
                                                            "with a new id")
            published[condition] = {"digest": done.digest,
                                    "ref": store.put(pack_workspace(folder / "tree"))}
    return published
