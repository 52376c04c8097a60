"""Which root file system a grading runs in, and its digest, the same for both backends.

scripts/build-grader-images.sh keeps each toolchain's rootfs as a tree,
`<cache>/rootfs/<name>`, with the digest of the tree beside it in `<name>.digest`, and imports
the Docker image `evalq-grader-<name>:local` from that very tree, labelled with the digest.
bubblewrap binds the tree read-only as its root, so a verdict cannot depend on the backend:
both run the same Node, Python and compiler, and every grade records which.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from evalq.errors import SandboxError

DEFAULT_CACHE = "/var/cache/evalq-graders"
#: the image of a fixture that names none (models.FixtureSpec.image) and of a bare sandbox run
DEFAULT_IMAGE = "evalq-grader-python:local"
#: the label `docker import` puts on a local grader image (scripts/build-grader-images.sh)
DIGEST_LABEL = "org.evalq.rootfs-digest"
LOCAL_IMAGE = re.compile(r"^evalq-grader-([a-z0-9][a-z0-9_-]*):local$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


def build_command(name: str) -> str:
    return (f"make docker, or as root: bash scripts/build-grader-images.sh {name} "
            f"(--rootfs-only {name} on a host without Docker)")


@dataclass(frozen=True)
class Toolchain:
    """A grading's root file system: its name, where it lies (bwrap) and its digest."""

    image: str
    name: Optional[str]
    digest: Optional[str]
    root: Optional[Path] = None
    image_id: Optional[str] = None  # Docker's id of the image (a commit keeps the label)

    def record(self) -> dict:
        return {"image": self.image, "toolchain": self.name, "rootfs_digest": self.digest}


def rootfs_dir() -> Path:
    return Path(os.environ.get("EVALQ_GRADER_CACHE") or DEFAULT_CACHE) / "rootfs"


def local_rootfs(image: str) -> Toolchain:
    """The tree bubblewrap grades `image` in; SandboxError naming the build command if absent.

    No fallback to the host's /usr: grading there would make the verdict depend on the backend.
    """
    match = LOCAL_IMAGE.match(image)
    if match is None:
        raise SandboxError(
            f"bubblewrap grades only in evalq's local toolchains (evalq-grader-NAME:local), "
            f"not {image!r}: grade this fixture with EVALQ_SANDBOX=docker")
    name = match.group(1)
    root = rootfs_dir() / name
    digest_file = root.with_name(f"{name}.digest")
    try:
        digest = digest_file.read_text().strip()
    except OSError:
        digest = ""
    if not (root / "usr").is_dir() or not _DIGEST.match(digest):
        raise SandboxError(f"toolchain rootfs {root} for {image!r} is not built "
                           f"(or {digest_file} is missing): {build_command(name)}")
    return Toolchain(image=image, name=name, digest=digest, root=root)


def image_toolchain(image: str, labels: dict | None, image_id: str | None) -> Toolchain:
    """A Docker image's toolchain: its rootfs digest label, else the image id (a pulled image)."""
    match = LOCAL_IMAGE.match(image)
    digest = (labels or {}).get(DIGEST_LABEL)
    if not (isinstance(digest, str) and _DIGEST.match(digest)):
        digest = f"docker-image:{image_id}" if image_id else None
    return Toolchain(image=image, name=match.group(1) if match else None, digest=digest,
                     image_id=image_id)
