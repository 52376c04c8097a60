"""A long TMPDIR (CI runners, macOS) breaks nothing: unix sockets are bound through their
folder's descriptor, since bind() takes at most 107 bytes of path."""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
import uuid
from pathlib import Path

import pytest

from evalq.unix_sockets import bound_unix_socket
from tests.conftest import FIXTURES, run_cli

#: what each reference of a fixture must grade as
VERDICTS = {"initial": "incorrect", "correct": "correct", "incorrect": "incorrect"}


@pytest.fixture
def long_folder():
    """A folder of over 200 characters the sandbox users can pass through (under the system's
    temporary folder, not pytest's private one), removed afterwards."""
    root = Path(tempfile.gettempdir()) / f"evalq-long-{uuid.uuid4().hex[:12]}"
    folder = root
    while len(str(folder)) < 220:
        folder = folder / ("d" * 40)
    folder.mkdir(parents=True)
    for made in [folder, *folder.parents]:
        if made == root.parent:
            break
        made.chmod(0o755)
    yield folder
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
def test_grading_with_a_200_character_tmpdir(long_folder, backend):
    proc = run_cli(["fixtures", "check", str(FIXTURES / "py-slugify-bugfix"), "--json"],
                   env_extra={"TMPDIR": str(long_folder), "EVALQ_SANDBOX": backend})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (row,) = json.loads(proc.stdout)
    assert row["failures"] == [] and {k: row[k] for k in VERDICTS} == VERDICTS, row


def test_a_socket_binds_and_answers_at_a_200_character_path(long_folder, tmp_path):
    folder = long_folder
    listener = bound_unix_socket(folder / "door.sock")
    listener.listen(1)
    short = tmp_path / "s"
    short.symlink_to(folder)  # a client names the same place by a short path, as sandboxes do
    with listener, socket.socket(socket.AF_UNIX) as client:
        client.connect(str(short / "door.sock"))
        conn, _ = listener.accept()
        with conn:
            client.sendall(b"ping")
            assert conn.recv(4) == b"ping"
    assert (folder / "door.sock").is_socket()
