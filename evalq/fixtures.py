"""Fixtures on disk: loading, the contract limits (F3), digests (F2) and fresh workspaces (R1).

A fixture is a directory:

    fixture.toml           FixtureSpec, with its own `digest` and `workspace_digest`
    workspace/             the known-good initial repository the agent starts from
    hidden/                hidden acceptance tests, overlaid onto a copy of the final workspace
    solutions/correct/     overlay that solves the task
    solutions/incorrect/   plausible overlay that passes visible tests and fails a hidden one

An overlay may hold `.evalq-delete`: one workspace path per line to remove.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from evalq.digest import data_digest, combine, tree_digest, tree_files
from evalq.errors import UserError
from evalq.overlay import copy_tree
from evalq.models import FixtureSpec
from evalq.tomlio import load_document, validation_error

MAX_FILES = 64
MAX_CHARACTERS = 262_144
MANIFEST = "fixture.toml"
REQUIRED_DIRS = ("workspace", "hidden", "solutions/correct", "solutions/incorrect")
SOLUTIONS = ("correct", "incorrect")
#: optional spec fields added after fixtures were first frozen: in the digest only when set
ADDED_LATER = (("grade", "protected"), ("grade", "verdict"))


@dataclass(frozen=True)
class Fixture:
    path: Path
    spec: FixtureSpec

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def digest(self) -> str:
        assert self.spec.digest is not None
        return self.spec.digest

    @property
    def workspace_dir(self) -> Path:
        return self.path / "workspace"

    @property
    def hidden_dir(self) -> Path:
        return self.path / "hidden"

    def solution_dir(self, name: str) -> Path:
        if name not in SOLUTIONS:
            raise UserError(f"unknown reference solution '{name}'", field="solution",
                            fix=f"use one of {', '.join(SOLUTIONS)}")
        return self.path / "solutions" / name


def check_contract(path: Path) -> None:
    """Refuse a fixture over the contract limits: 64 files, 262,144 characters of content."""
    files = tree_files(path)
    if len(files) > MAX_FILES:
        raise UserError(f"fixture has {len(files)} files, over the limit of {MAX_FILES}",
                        file=path, fix="make the task smaller or merge files")
    total = 0
    for file in files:
        raw = file.read_bytes()
        try:
            total += len(raw.decode("utf-8"))
        except UnicodeDecodeError:
            total += len(raw)
    if total > MAX_CHARACTERS:
        raise UserError(f"fixture has {total} characters of file content, over the limit of "
                        f"{MAX_CHARACTERS}", file=path, fix="make the task smaller")


def compute_digests(path: Path, spec: FixtureSpec) -> tuple[str, str]:
    """(fixture digest, workspace digest). The fixture digest covers every file and the spec."""
    spec_data = spec.model_dump(mode="json", exclude={"digest", "workspace_digest"})
    for section, key in ADDED_LATER:  # unset, they leave digests frozen before them unchanged
        if spec_data.get(section, {}).get(key) is None:
            spec_data[section].pop(key, None)
    files = tree_digest(path, exclude=[MANIFEST])
    return combine(files, data_digest(spec_data)), tree_digest(path / "workspace")


def read_spec(path: Path) -> FixtureSpec:
    manifest = path / MANIFEST
    if not path.is_dir():
        raise UserError("fixture directory not found", file=path, fix="check the path")
    data = load_document(manifest)
    try:
        return FixtureSpec.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc, manifest) from None


def check_layout(path: Path) -> None:
    for rel in REQUIRED_DIRS:
        folder = path / rel
        if not folder.is_dir() or not any(folder.rglob("*")):
            raise UserError(f"missing or empty '{rel}/'", file=path,
                            fix=f"add {rel}/ (see `evalq fixtures new`)")


def load_fixture(path: str | Path, verify: bool = True) -> Fixture:
    """Load and check a fixture; with verify, its files must match its recorded digest."""
    path = Path(path).resolve()
    spec = read_spec(path)
    check_layout(path)
    check_contract(path)
    if verify:
        digest, ws_digest = compute_digests(path, spec)
        if spec.digest is None:
            raise UserError("fixture has no recorded digest", file=path / MANIFEST,
                            field="digest", fix=f"run `evalq fixtures freeze {path}`")
        if spec.digest != digest or spec.workspace_digest != ws_digest:
            raise UserError("fixture files no longer match the recorded digest "
                            f"{spec.digest[:19]}…", file=path / MANIFEST, field="digest",
                            fix="restore the fixture, or re-freeze it deliberately with "
                                "`evalq fixtures freeze` (a new suite version)")
    return Fixture(path=path, spec=spec)


_DIGEST_LINE = re.compile(r'^(digest|workspace_digest)\s*=.*\n?', re.MULTILINE)


def freeze_fixture(path: str | Path) -> Fixture:
    """Record the fixture's current digests in its own fixture.toml."""
    path = Path(path).resolve()
    spec = read_spec(path)
    check_layout(path)
    check_contract(path)
    digest, ws_digest = compute_digests(path, spec)
    manifest = path / MANIFEST
    body = _DIGEST_LINE.sub("", manifest.read_text(encoding="utf-8")).lstrip("\n")
    header = f'digest = "{digest}"\nworkspace_digest = "{ws_digest}"\n'
    manifest.write_text(header + body, encoding="utf-8")
    return load_fixture(path)


def materialize(fixture: Fixture, dest: Path) -> Path:
    """Build the initial workspace in a fresh, empty directory and check its digest (R1)."""
    dest.mkdir(parents=True, exist_ok=False)
    copy_tree(fixture.workspace_dir, dest)
    actual = tree_digest(dest)
    if actual != fixture.spec.workspace_digest:
        raise UserError("materialized workspace does not match the fixture's workspace digest",
                        file=fixture.path, field="workspace_digest",
                        fix="re-freeze the fixture or restore its files")
    return dest
