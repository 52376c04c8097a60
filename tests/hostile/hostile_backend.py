"""The `backend` fixture of the hostile tests (import it): each test runs in both sandboxes."""

import shutil
import tempfile
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest

from evalq.graders.sandbox import get_sandbox


@pytest.fixture(params=["bwrap", "docker"])
def backend(request):
    sandbox = get_sandbox(request.param)
    ok, why = sandbox.available()
    if not ok:
        pytest.fail(f"sandbox '{request.param}' is not available: {why}", pytrace=False)
    return sandbox


@contextmanager
def traversable_tempdir(prefix: str, monkeypatch):
    """Grading copies under a folder the sandbox users can traverse, checked empty and removed
    afterwards (every grading cleans up after itself)."""
    folder = Path(tempfile.gettempdir()) / f"{prefix}{uuid.uuid4().hex[:12]}"
    folder.mkdir(mode=0o711)
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    yield folder
    leftover = list(folder.iterdir())
    shutil.rmtree(folder, ignore_errors=True)
    assert leftover == [], leftover
