"""Content-addressed artifact store: a local directory or shared mount (any machine can read it).

References are 'sha256:<hex>'; the same bytes are stored once. Writes are atomic renames, so a
crash never leaves a half-written blob under its final name.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from .errors import InfrastructureError


class ArtifactStore:
    def __init__(self, root: str | Path):
        root = str(root)
        if root.startswith("file://"):
            root = root[len("file://"):]
        self.root = Path(root)

    def _path(self, ref: str) -> Path:
        if not ref.startswith("sha256:") or len(ref) != 71:
            raise InfrastructureError(f"not an artifact reference: {ref!r}")
        digest = ref[7:]
        return self.root / "sha256" / digest[:2] / digest

    def put(self, data: bytes) -> str:
        ref = "sha256:" + hashlib.sha256(data).hexdigest()
        path = self._path(ref)
        if path.exists():
            return ref
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return ref

    def get(self, ref: str) -> bytes:
        path = self._path(ref)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise InfrastructureError(f"artifact {ref} is missing from {self.root}") from None
        if "sha256:" + hashlib.sha256(data).hexdigest() != ref:
            raise InfrastructureError(f"artifact {ref} is corrupt in {self.root}")
        return data

    def exists(self, ref: str) -> bool:
        return self._path(ref).exists()


def open_store(url: str) -> ArtifactStore:
    return ArtifactStore(url)
