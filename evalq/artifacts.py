"""Content-addressed artifact store: a local directory or shared mount (any machine can read it).

References are 'sha256:<hex>'; the same bytes are stored once. Writes are atomic renames, so a
crash never leaves a half-written blob under its final name.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from evalq.errors import InfrastructureError


def reference_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def relative_path(ref: str) -> str:
    """Where a reference lives under a store's root: sha256/<first two hex>/<digest>."""
    if not ref.startswith("sha256:") or len(ref) != 71:
        raise InfrastructureError(f"not an artifact reference: {ref!r}")
    digest = ref[7:]
    return f"sha256/{digest[:2]}/{digest}"


def verified(ref: str, data: bytes, where: str) -> bytes:
    """The bytes, if they still hash to their reference; a store must never serve corruption."""
    if reference_of(data) != ref:
        raise InfrastructureError(f"artifact {ref} is corrupt in {where}")
    return data


class ArtifactStore:
    def __init__(self, root: str | Path):
        root = str(root)
        if root.startswith("file://"):
            root = root[len("file://"):]
        self.root = Path(root)

    def _path(self, ref: str) -> Path:
        return self.root / relative_path(ref)

    def put(self, data: bytes) -> str:
        ref = reference_of(data)
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
        return verified(ref, data, str(self.root))

    def exists(self, ref: str) -> bool:
        return self._path(ref).exists()


class FsspecArtifactStore:
    """The same content-addressed layout on object storage (s3://, gs://, memory://, ...).

    Needs the optional extra `evalq[object-store]` (fsspec, plus s3fs/gcsfs for those schemes).
    Objects are written whole under their digest, so a half-written name never exists there.
    """

    def __init__(self, url: str):
        try:
            import fsspec
        except ImportError:
            raise InfrastructureError(f"artifact store {url} needs fsspec: pip install "
                                      "'evalq[object-store]'") from None
        self.url = url.rstrip("/")
        self.fs, self.root = fsspec.core.url_to_fs(self.url)

    def _path(self, ref: str) -> str:
        return f"{self.root}/{relative_path(ref)}"

    def put(self, data: bytes) -> str:
        ref = reference_of(data)
        path = self._path(ref)
        if not self.fs.exists(path):
            self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
            self.fs.pipe_file(path, data)
        return ref

    def get(self, ref: str) -> bytes:
        try:
            data = self.fs.cat_file(self._path(ref))
        except FileNotFoundError:
            raise InfrastructureError(f"artifact {ref} is missing from {self.url}") from None
        return verified(ref, data, self.url)

    def exists(self, ref: str) -> bool:
        return bool(self.fs.exists(self._path(ref)))


def open_store(url: str) -> ArtifactStore | FsspecArtifactStore:
    """A local directory or shared mount (a path or file://), else object storage via fsspec."""
    if "://" in str(url) and not str(url).startswith("file://"):
        return FsspecArtifactStore(str(url))
    return ArtifactStore(url)
