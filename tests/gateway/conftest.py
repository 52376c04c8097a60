"""Gateway tests: the scripted model server plays the provider, requests go over real unix
sockets (as the in-sandbox forwarder sends them), the shared semaphore uses the real Redis."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from evalq.workers.gateway import Gateway


@pytest.fixture
def sock_dir():
    """A short private directory: unix socket paths must stay under 108 bytes."""
    path = Path(tempfile.mkdtemp(prefix="gw-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def gateway():
    gw = Gateway()
    yield gw
    gw.close()
