"""The fixture suite: a directory of fixtures and the lock that pins each one (SPEC F2, F5).

`fixtures/suite.lock.json` is shipped in the repository:

    {"suite_id": "evalq-core", "suite_version": 3,
     "fixtures": {"py-slugify-bugfix": {"path": "py-slugify-bugfix", "digest": "sha256:…"}},
     "suite_digest": "sha256:…"}

Every fixture also records its own digest in its own fixture.toml, so a fixture copied out
of the suite is still checked; the lock adds the suite's identity (id, version, digest) and
catches a fixture that was re-frozen without re-freezing the suite.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalq.digest import data_digest
from evalq.errors import UserError
from evalq.fixtures import MANIFEST, Fixture, freeze_fixture, load_fixture

LOCK_NAME = "suite.lock.json"
DEFAULT_SUITE_ID = "evalq-core"
#: The suite shipped with evalq (a source checkout's fixtures/ directory).
DEFAULT_SUITE_DIR = Path(__file__).resolve().parent.parent / "fixtures"


@dataclass(frozen=True)
class Suite:
    root: Path
    suite_id: str
    suite_version: int
    suite_digest: str
    fixtures: tuple[Fixture, ...]

    def fixture(self, fixture_id: str) -> Fixture:
        for fixture in self.fixtures:
            if fixture.id == fixture_id:
                return fixture
        raise UserError(f"fixture '{fixture_id}' is not in suite '{self.suite_id}'",
                        file=self.root / LOCK_NAME,
                        fix=f"use one of {', '.join(f.id for f in self.fixtures)}")


def default_suite_dir() -> Path:
    """`./fixtures` when the current directory has one, else the suite shipped with evalq."""
    local = Path("fixtures")
    if (local / LOCK_NAME).is_file() or (local.is_dir() and find_fixtures(local)):
        return local.resolve()
    return DEFAULT_SUITE_DIR


def is_fixture_dir(path: Path) -> bool:
    return (path / MANIFEST).is_file()


def find_fixtures(root: str | Path) -> list[Path]:
    """Every fixture directory under root (root itself if it is one), in path order.

    The search does not descend into a fixture: a fixture.toml inside another fixture's
    workspace or solutions is part of that fixture, not a fixture of its own.
    """
    root = Path(root)
    if is_fixture_dir(root):
        return [root.resolve()]
    found: list[Path] = []
    for dirpath, dirnames, _ in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        here = Path(dirpath)
        if here != root and is_fixture_dir(here):
            found.append(here.resolve())
            dirnames[:] = []
    return sorted(found, key=lambda p: p.as_posix())


def suite_digest(suite_id: str, entries: dict[str, dict[str, str]]) -> str:
    """sha256 over the suite id and each fixture's id and digest (paths do not count)."""
    return data_digest({"suite_id": suite_id,
                        "fixtures": {fid: entry["digest"] for fid, entry in entries.items()}})


def lock_path(root: str | Path) -> Path:
    return Path(root) / LOCK_NAME


def read_lock(root: str | Path) -> dict[str, Any] | None:
    """The suite lock of a directory, or None when it has none. A malformed lock is refused."""
    path = lock_path(root)
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot parse suite lock: {exc}", file=path,
                        fix="restore it, or re-create it with `evalq fixtures freeze`") from None
    problems = []
    if not isinstance(data, dict):
        problems.append("not a JSON object")
    else:
        for key, kind in (("suite_id", str), ("suite_version", int), ("fixtures", dict),
                          ("suite_digest", str)):
            if not isinstance(data.get(key), kind):
                problems.append(f"'{key}' missing or not a {kind.__name__}")
        for fid, entry in (data.get("fixtures") or {}).items():
            if not (isinstance(entry, dict) and isinstance(entry.get("path"), str)
                    and isinstance(entry.get("digest"), str)):
                problems.append(f"entry '{fid}' needs a path and a digest")
    if problems:
        raise UserError(f"malformed suite lock: {problems[0]}", file=path,
                        fix="restore it, or re-create it with `evalq fixtures freeze`")
    return data


def _entries(root: Path, fixtures: list[Fixture]) -> dict[str, dict[str, str]]:
    entries: dict[str, dict[str, str]] = {}
    for fixture in fixtures:
        if fixture.id in entries:
            raise UserError(f"two fixtures have the id '{fixture.id}': "
                            f"{entries[fixture.id]['path']} and "
                            f"{fixture.path.relative_to(root).as_posix()}",
                            file=fixture.path / MANIFEST, field="id",
                            fix="give every fixture a unique id")
        entries[fixture.id] = {"path": fixture.path.relative_to(root).as_posix(),
                               "digest": fixture.digest}
    return dict(sorted(entries.items()))


def build_lock(root: Path, fixtures: list[Fixture], suite_id: str,
               previous: dict[str, Any] | None) -> dict[str, Any]:
    """The lock for these fixtures; the version goes up by one whenever the digest changes."""
    entries = _entries(root, fixtures)
    digest = suite_digest(suite_id, entries)
    version = 1
    if previous is not None:
        version = previous["suite_version"]
        if previous["suite_digest"] != digest or previous["suite_id"] != suite_id:
            version += 1
    return {"suite_id": suite_id, "suite_version": version, "fixtures": entries,
            "suite_digest": digest}


def write_lock(root: Path, lock: dict[str, Any]) -> Path:
    path = lock_path(root)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(lock, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def freeze_suite(root: str | Path, suite_id: str | None = None) -> dict[str, Any]:
    """Re-freeze every fixture under root and write root/suite.lock.json; returns the lock.

    The suite id is kept from an existing lock unless given; a new lock of the shipped
    suite is `evalq-core`, any other directory's is named after the directory.
    """
    root = Path(root).resolve()
    if not root.is_dir():
        raise UserError("suite directory not found", file=root, fix="check the path")
    paths = find_fixtures(root)
    if not paths or paths == [root]:
        raise UserError("no fixtures found under this directory", file=root,
                        fix="point at a directory of fixtures (each with a fixture.toml)")
    previous = read_lock(root)
    if suite_id is None:
        if previous is not None:
            suite_id = previous["suite_id"]
        else:
            suite_id = DEFAULT_SUITE_ID if root == DEFAULT_SUITE_DIR else root.name
    fixtures = [freeze_fixture(path) for path in paths]
    lock = build_lock(root, fixtures, suite_id, previous)
    if previous != lock:
        write_lock(root, lock)
    return lock


def lock_fixture(root: str | Path, fixture: Fixture) -> dict[str, Any]:
    """Record one (already frozen) fixture in the lock of the suite at root, leaving the
    other entries as they are; returns the new lock (its version goes up if it changed)."""
    root = Path(root).resolve()
    previous = read_lock(root)
    if previous is None:
        raise UserError("no suite lock", file=lock_path(root),
                        fix=f"run `evalq fixtures freeze {root}`")
    entries = {fid: dict(entry) for fid, entry in previous["fixtures"].items()}
    rel = fixture.path.relative_to(root).as_posix()
    for fid, entry in entries.items():
        if entry["path"] == rel and fid != fixture.id:
            del entries[fid]  # the fixture at this path was renamed
            break
    entries[fixture.id] = {"path": rel, "digest": fixture.digest}
    entries = dict(sorted(entries.items()))
    digest = suite_digest(previous["suite_id"], entries)
    version = previous["suite_version"] + (digest != previous["suite_digest"])
    lock = {"suite_id": previous["suite_id"], "suite_version": version, "fixtures": entries,
            "suite_digest": digest}
    if lock != previous:
        write_lock(root, lock)
    return lock


def check_against_lock(fixture: Fixture, lock: dict[str, Any], root: Path) -> None:
    """Refuse a fixture whose digest is not the one the suite lock records for its id."""
    entry = lock["fixtures"].get(fixture.id)
    if entry is None:
        raise UserError(f"fixture '{fixture.id}' is not in the suite lock of "
                        f"'{lock['suite_id']}'", file=lock_path(root),
                        fix=f"run `evalq fixtures freeze {root}` to add it (a new suite version)")
    if entry["digest"] != fixture.digest:
        raise UserError(f"fixture '{fixture.id}' does not match the suite lock: lock has "
                        f"{entry['digest'][:19]}…, fixture has {fixture.digest[:19]}…",
                        file=lock_path(root),
                        fix=f"restore {entry['path']}, or re-freeze the suite deliberately "
                            f"with `evalq fixtures freeze {root}` (a new suite version)")


def load_suite(root: str | Path | None = None) -> Suite:
    """Load a suite and check every fixture against its own digest and against the lock."""
    root = Path(root).resolve() if root is not None else default_suite_dir()
    lock = read_lock(root)
    if lock is None:
        raise UserError("no suite lock", file=lock_path(root),
                        fix=f"run `evalq fixtures freeze {root}`")
    fixtures: list[Fixture] = []
    for fid, entry in lock["fixtures"].items():
        path = (root / entry["path"]).resolve()
        if root not in path.parents:
            raise UserError(f"suite lock entry '{fid}' points outside the suite: {entry['path']}",
                            file=lock_path(root), fix="restore the lock")
        if not is_fixture_dir(path):
            raise UserError(f"fixture '{fid}' is missing: no {entry['path']}/{MANIFEST}",
                            file=lock_path(root),
                            fix=f"restore {entry['path']}, or remove it deliberately and run "
                                f"`evalq fixtures freeze {root}`")
        fixture = load_fixture(path)
        if fixture.id != fid:
            raise UserError(f"{entry['path']} holds fixture '{fixture.id}', the lock expects "
                            f"'{fid}'", file=lock_path(root),
                            fix=f"restore it, or run `evalq fixtures freeze {root}`")
        check_against_lock(fixture, lock, root)
        fixtures.append(fixture)
    locked = {p for p in (f.path for f in fixtures)}
    for path in find_fixtures(root):
        if path not in locked:
            raise UserError(f"fixture directory {path.relative_to(root).as_posix()} is not in "
                            f"the suite lock", file=lock_path(root),
                            fix=f"run `evalq fixtures freeze {root}` to add it, or move it "
                                "out of the suite")
    expected = suite_digest(lock["suite_id"], lock["fixtures"])
    if lock["suite_digest"] != expected:
        raise UserError("suite digest does not match the fixtures the lock lists",
                        file=lock_path(root), field="suite_digest",
                        fix=f"restore the lock, or run `evalq fixtures freeze {root}`")
    return Suite(root=root, suite_id=lock["suite_id"], suite_version=lock["suite_version"],
                 suite_digest=lock["suite_digest"], fixtures=tuple(fixtures))


def enclosing_lock(fixture_path: Path) -> tuple[Path, dict[str, Any]] | None:
    """The suite directory and lock a fixture directory sits in, if its parent has a lock."""
    parent = Path(fixture_path).resolve().parent
    lock = read_lock(parent)
    return (parent, lock) if lock is not None else None


# ------------------------------------------------------------------ grader self-check (F4)
#: What each reference must grade as: the correct one `correct`, the other two `incorrect`.
EXPECTED = {"initial": "incorrect", "correct": "correct", "incorrect": "incorrect"}
_SOLUTION = {"initial": None, "correct": "correct", "incorrect": "incorrect"}


@dataclass
class SelfCheck:
    """The self-check of one fixture: three verdicts, or a one-line refusal."""

    path: Path
    fixture: str
    digest: str | None = None
    kind: str | None = None
    toolchain: str | None = None
    verdicts: dict[str, str | None] | None = None
    results: dict[str, Any] | None = None  # name -> GradeResult
    failures: list[str] | None = None
    refused: bool = False

    @property
    def ok(self) -> bool:
        return not self.failures

    def to_json(self) -> dict[str, Any]:
        verdicts = self.verdicts or {}
        reasons = {name: (result.reason if result is not None else None)
                   for name, result in (self.results or {}).items()}
        return {"fixture": self.fixture, "path": str(self.path), "digest": self.digest,
                "kind": self.kind, "toolchain": self.toolchain,
                "initial": verdicts.get("initial"), "correct": verdicts.get("correct"),
                "incorrect": verdicts.get("incorrect"), "ok": self.ok,
                "refused": self.refused, "failures": list(self.failures or []),
                "reasons": reasons}


def _verdict_problem(name: str, result) -> str | None:
    outcome = result.outcome.value
    if outcome == EXPECTED[name]:
        return None
    why = f": {result.reason}" if result.reason else ""
    if name == "correct":
        return f"correct reference graded {outcome}{why}"
    if outcome == "correct":
        if name == "incorrect":
            return ("incorrect reference passes the hidden tests (it must fail at least one "
                    "hidden check)")
        return "untouched workspace passes the hidden tests (the task is already solved)"
    label = "incorrect reference" if name == "incorrect" else "untouched workspace"
    return f"{label} graded {outcome}{why}"


def self_check(path: str | Path, *, sandbox: str | None = None,
               lock: tuple[Path, dict[str, Any]] | None = None) -> SelfCheck:
    """Load a fixture (digest, contract, layout, and the suite lock when given or found
    beside it) and grade its untouched workspace and both reference solutions."""
    import tempfile

    from evalq.graders.grade import grade_workspace, prepare_reference

    path = Path(path).resolve()
    check = SelfCheck(path=path, fixture=path.name)
    try:
        fixture = load_fixture(path)
        check.fixture, check.digest = fixture.id, fixture.digest
        check.kind, check.toolchain = fixture.spec.kind, fixture.spec.toolchain
        lock = lock if lock is not None else enclosing_lock(path)
        if lock is not None:
            check_against_lock(fixture, lock[1], lock[0])
    except UserError as exc:
        check.refused, check.failures = True, [exc.one_line()]
        return check
    check.verdicts, check.results, check.failures = {}, {}, []
    for name in ("initial", "correct", "incorrect"):
        with tempfile.TemporaryDirectory(prefix="evalq-selfcheck-") as tmp:
            workspace = prepare_reference(fixture, _SOLUTION[name], Path(tmp) / "workspace")
            result = grade_workspace(fixture, workspace, sandbox=sandbox,
                                     label=f"selfcheck-{fixture.id}-{name}")
        check.verdicts[name] = result.outcome.value
        check.results[name] = result
        problem = _verdict_problem(name, result)
        if problem:
            check.failures.append(problem)
    return check


def lock_problems(root: Path) -> tuple[list[str], list[str]]:
    """Suite-level problems of a directory with a lock: (messages, ids of locked fixtures
    whose directories are missing). Per-fixture digests are checked by self_check."""
    try:
        lock = read_lock(root)
    except UserError as exc:
        return [exc.one_line()], []
    if lock is None:
        return [], []
    problems, missing = [], []
    for fid, entry in lock["fixtures"].items():
        if not is_fixture_dir(root / entry["path"]):
            missing.append(fid)
    if lock["suite_digest"] != suite_digest(lock["suite_id"], lock["fixtures"]):
        problems.append(UserError("suite digest does not match the fixtures the lock lists",
                                  file=lock_path(root), field="suite_digest",
                                  fix=f"restore the lock, or run `evalq fixtures freeze "
                                      f"{root}`").one_line())
    return problems, missing
