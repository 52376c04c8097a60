"""Redaction of credentials from everything evalq keeps: artifacts, payloads (DB rows), logs.

A value shorter than MIN_SECRET characters is not treated as a secret (it would mangle text).
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from pathlib import Path
from typing import Any, Iterable

from evalq.errors import AgentDataError
from evalq.fixtures.archive import MAX_WORKSPACE_BYTES, WorkspaceTooLarge
from evalq.plaintext import escaped_name
from evalq.treewalk import walk

from evalq.workers.secrets import secret_values

MASK = "[REDACTED]"
MIN_SECRET = 8


class Redactor:
    def __init__(self, secrets: Iterable[str]):
        self.secrets = sorted({s for s in secrets if s and len(s) >= MIN_SECRET}, key=len,
                              reverse=True)
        self._bytes = [s.encode() for s in self.secrets]

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def text(self, value: str) -> str:
        for secret in self.secrets:
            value = value.replace(secret, MASK)
        return value

    def data(self, value: bytes) -> bytes:
        for secret in self._bytes:
            value = value.replace(secret, MASK.encode())
        return value

    def obj(self, value: Any) -> Any:
        """A JSON-like value with every string redacted (keys too)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, bytes):
            return self.data(value)
        if isinstance(value, dict):
            return {self.obj(k): self.obj(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self.obj(v) for v in value)
        return value

    def tree(self, root: Path, limit: int = MAX_WORKSPACE_BYTES) -> list[str]:
        """Rewrite, in place, every regular file under root that holds a secret; returns
        their names (escaped, valid UTF-8).

        Past `limit` bytes of files it stops with WorkspaceTooLarge, as packing the workspace
        would: an agent's tree of huge sparse files costs no disk, and reading it all here
        would hold the worker for hours. A file it cannot read is left (packing drops it as
        unreadable too); one holding a secret it cannot rewrite is removed, and if even that
        fails the workspace is refused (AgentDataError): a credential is never stored."""
        changed: list[str] = []
        if not self:
            return changed
        total = 0
        for entry in walk(root):
            # a hard link is never packed; rewriting it would write through to its other names
            if not entry.is_regular or entry.st.st_nlink > 1:
                continue
            total += entry.st.st_size
            if total > limit:
                raise WorkspaceTooLarge(f"workspace over {limit} bytes of files "
                                        f"(at {escaped_name(entry.name)[:120]})")
            data = read_regular(entry.path, limit)
            if data is None:
                continue
            clean = self.data(data)
            if clean != data:
                _rewrite(entry.path, entry.name, clean)
                changed.append(escaped_name(entry.name))
        return changed


def read_regular(path: str, limit: int) -> bytes | None:
    """A regular file's bytes (at most `limit` + 1), never following a link or opening a FIFO
    or device put in its place; None when it cannot be read (mode 000, replaced)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        try:
            return handle.read(limit + 1)
        except OSError:
            return None


def _rewrite(path: str, name: str, clean: bytes) -> None:
    """Write the redacted bytes over the file (made writable first: the agent may have left it
    read-only), else remove it; AgentDataError when neither can be done."""
    try:
        os.chmod(path, 0o600, follow_symlinks=False)
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "wb") as handle:
            handle.write(clean)
        return
    except OSError:
        pass
    try:
        os.unlink(path)
    except OSError as exc:
        raise AgentDataError(f"a workspace file holding a credential can be neither "
                             f"redacted nor removed ({escaped_name(name)[:120]}: "
                             f"{exc.strerror})") from None


def default_redactor() -> Redactor:
    return Redactor(secret_values())


class RedactingFilter(logging.Filter):
    """Rewrites a log record's message with secrets masked before any handler sees it."""

    def __init__(self, redactor: Redactor):
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        if self.redactor:
            message = record.getMessage()
            clean = self.redactor.text(message)
            if clean != message:
                record.msg, record.args = clean, None
        return True


_install_lock = threading.Lock()


def install_log_redaction(redactor: Redactor | None = None) -> None:
    """Add the filter to every handler of the root logger (once per handler, even when many
    trial threads of one worker ask at the same moment)."""
    redactor = redactor or default_redactor()
    with _install_lock:
        for handler in logging.getLogger().handlers:
            if not any(isinstance(f, RedactingFilter) for f in handler.filters):
                handler.addFilter(RedactingFilter(redactor))
