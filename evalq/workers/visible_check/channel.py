"""The worker's side of the visible-check shim: count the check's runs, snapshot the first.

A folder of the worker's holds the shim, a wrapper named after the check's program and a unix
socket; a sealed sandbox sees it read-only at CHECK_DIR, with CHECK_DIR/bin first on PATH.
Each run of the program connects and sends its arguments. A run is the visible check when the
declared arguments appear among its own, in order (`pytest -q tests_visible` runs the check
`pytest tests_visible`; `make -j2 test` runs `make test`). At the first such run the worker
copies the workspace into a folder of its own (snapshot.py), redacts and packs it, and only
then answers, so the snapshot is the workspace as it was before the check ran; later runs are
counted with their times. Everything is decided and kept here, in the worker's process: the
agent can connect to the socket itself (that only claims a check run, which is its choice to
make) but can neither change a snapshot already taken nor reach the folder it lies in.

Connections are served one at a time with short timeouts and bounded messages, and the
counts kept are bounded, so a flood costs the agent its own time only.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import socket
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from evalq.errors import AgentDataError
from evalq.fixtures.archive import pack_workspace
from evalq.plaintext import valid_text
from evalq.unix_sockets import bound_unix_socket
from evalq.workers.sandbox.base import CHECK_DIR
from evalq.workers.visible_check.shim import GREETING, MAX_MESSAGE
from evalq.workers.visible_check.snapshot import copy_live

log = logging.getLogger("evalq.worker")

SHIM_SOURCE = Path(__file__).with_name("shim.py")
#: run times kept one by one (all runs are counted)
RUN_TIMES_KEPT = 1000
#: how long one connection may take to send its arguments
RECEIVE_SECONDS = 2.0
#: arguments of the first check kept as evidence, and characters of each
ARGS_KEPT, ARG_CHARS = 40, 200


def is_check(declared: list[str], args: list[str]) -> bool:
    """Whether `args` (a run's arguments) hold the declared ones in order."""
    found = iter(args)
    return all(any(arg == want for arg in found) for want in declared)


@dataclass
class CheckRecord:
    """What the worker saw of the visible check during one run."""

    declared: list[str]
    first_check_at: Optional[float] = None
    check_runs: int = 0
    run_times: list[float] = field(default_factory=list)
    first_args: Optional[list[str]] = None
    #: runs of the program that were not the check, and messages that were not the shim's
    other_runs: int = 0
    ignored_messages: int = 0
    #: the packed workspace at the first check (None: no check, or refused)
    snapshot: Optional[bytes] = None
    snapshot_refused: Optional[str] = None
    snapshot_dropped: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {"declared": self.declared, "first_check_at": self.first_check_at,
                "check_runs": self.check_runs, "run_times": self.run_times,
                "first_args": self.first_args, "other_runs": self.other_runs,
                "ignored_messages": self.ignored_messages,
                "snapshot_refused": self.snapshot_refused,
                "snapshot_dropped": self.snapshot_dropped}


class CheckChannel:
    """One run's shim folder and listener. `seen_at`: where the agent sees the folder
    (CHECK_DIR when sealed; None: at its own path, for the unsealed `none` sandbox).
    `redact(folder)` masks credentials in the snapshot's copy before it is packed.
    `close()` after the run returns the record."""

    def __init__(self, command: list[str], workspace: Path, redact, seen_at: Optional[str],
                 agent_uid: Optional[int] = None):
        self.program, self.declared = command[0], list(command[1:])
        self.workspace, self.redact = workspace, redact
        self.record = CheckRecord(declared=list(command))
        self.folder = Path(tempfile.mkdtemp(prefix="evalq-check-"))
        self.seen = seen_at or str(self.folder)
        self._closing = threading.Event()
        self._listening: Optional[socket.socket] = None
        try:
            self._make_folder(agent_uid)
        except BaseException:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise
        self._thread = threading.Thread(target=self._serve, name="evalq-visible-check",
                                        daemon=True)
        self._thread.start()

    @property
    def bin_dir(self) -> str:
        """The folder to put first on the agent's PATH, as the agent sees it."""
        return f"{self.seen}/bin"

    def _make_folder(self, agent_uid: Optional[int]) -> None:
        shutil.copyfile(SHIM_SOURCE, self.folder / "shim.py")
        os.chmod(self.folder / "shim.py", 0o644)
        (self.folder / "bin").mkdir()
        wrapper = self.folder / "bin" / self.program
        seen = shlex.quote(self.seen)
        wrapper.write_text(
            "#!/bin/sh\n"
            "for py in /usr/bin/python3 /usr/local/bin/python3; do\n"
            f'  [ -x "$py" ] && exec "$py" -I -S {seen}/shim.py {seen} {self.program} "$@"\n'
            "done\n"
            f'echo "{self.program}: evalq\'s visible-check shim found no python3" >&2\n'
            "exit 127\n")
        os.chmod(wrapper, 0o755)
        os.chmod(self.folder / "bin", 0o755)
        path = self.folder / "channel.sock"
        self._listening = bound_unix_socket(path, socket.SOCK_SEQPACKET)
        self._listening.listen(64)
        self._listening.settimeout(0.2)
        if agent_uid is None:  # unsealed: the agent is this very user
            os.chmod(path, 0o600)
        elif os.geteuid() == 0:
            os.chown(path, agent_uid, agent_uid)  # the agent user may connect, no one else
        else:  # as the door's channel: without root, the sandbox's user needs it open
            os.chmod(path, 0o666)
        os.chmod(self.folder, 0o755)

    # ------------------------------------------------------------ the listener's thread
    def _serve(self) -> None:
        while not self._closing.is_set():
            try:
                conn, _ = self._listening.accept()
            except (socket.timeout, BlockingIOError, InterruptedError):
                continue
            except OSError:
                return  # closed
            try:
                self._one(conn)
            except Exception as exc:  # noqa: BLE001 - the agent's input never ends the listener
                log.warning("visible check: a run's message was not handled: %s", exc)
            finally:
                conn.close()

    def _one(self, conn: socket.socket) -> None:
        conn.settimeout(RECEIVE_SECONDS)
        try:
            data = conn.recv(MAX_MESSAGE + 1)
        except OSError:
            return
        if not data.startswith(GREETING):
            self.record.ignored_messages += 1
            return
        body = data[len(GREETING):MAX_MESSAGE]
        args = [os.fsdecode(a) for a in body.split(b"\0")] if body else []
        record, now = self.record, time.time()
        if not is_check(self.declared, args):
            record.other_runs += 1
        else:
            if record.first_check_at is None:
                record.first_check_at = now
                record.first_args = [valid_text(a)[:ARG_CHARS] for a in args[:ARGS_KEPT]]
                self._snapshot()
            record.check_runs += 1
            if len(record.run_times) < RUN_TIMES_KEPT:
                record.run_times.append(round(now, 3))
        try:
            conn.send(b"go")
        except OSError:
            pass  # the shim is gone: the record stands

    def _snapshot(self) -> None:
        """Copy, redact and pack the workspace now, before the first check is let run."""
        scratch = Path(tempfile.mkdtemp(prefix="evalq-first-check-"))
        try:
            self.record.snapshot_dropped = copy_live(self.workspace, scratch / "workspace")
            self.redact(scratch / "workspace")
            self.record.snapshot = pack_workspace(scratch / "workspace")
        except AgentDataError as exc:
            self.record.snapshot_refused = valid_text(str(exc))[:400]
        except OSError as exc:  # the workspace was no folder when the check ran
            self.record.snapshot_refused = (f"the workspace could not be read "
                                            f"({exc.strerror or exc})")
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    # ------------------------------------------------------------ after the run
    def close(self) -> CheckRecord:
        """Stop listening (a snapshot being taken is finished first), remove the folder."""
        self._closing.set()
        self._thread.join()
        if self._listening is not None:
            self._listening.close()
            self._listening = None
        shutil.rmtree(self.folder, ignore_errors=True)
        return self.record
