"""Run a process group with a wall-time limit and capped output; kill all of it on expiry.

Shared by agent runs and the bubblewrap sandbox, so both stop the same way.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional


#: how often a caller's should_stop (a cancelled study) is asked while the process runs
STOP_CHECK_SECONDS = 0.25


@dataclass
class ProcResult:
    exit_code: Optional[int]
    stdout: bytes
    stderr: bytes
    duration_seconds: float
    timed_out: bool
    output_exceeded: bool
    signal: Optional[int]


class _CappedReader(threading.Thread):
    """Drains a pipe, keeping at most `limit` bytes; flags when the limit is passed."""

    def __init__(self, stream, limit: int, on_exceed: Callable[[], None]):
        super().__init__(daemon=True)
        self.stream, self.limit, self.on_exceed = stream, limit, on_exceed
        self.chunks: list[bytes] = []
        self.size = 0
        self.exceeded = False

    def run(self) -> None:
        while True:
            chunk = self.stream.read(65536)
            if not chunk:
                break
            room = self.limit - self.size
            if room > 0:
                self.chunks.append(chunk[:room])
                self.size += min(room, len(chunk))
            if len(chunk) > room and not self.exceeded:
                self.exceeded = True
                self.on_exceed()
        self.stream.close()

    def data(self) -> bytes:
        return b"".join(self.chunks)


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run_bounded(argv: list[str], *, env: dict[str, str], cwd: str, timeout: float,
                output_limit: int, preexec: Callable[[], None] | None = None,
                stdin: bytes | None = None, grace_seconds: float = 2.0,
                on_kill: Callable[[], None] | None = None,
                should_stop: Callable[[], bool] | None = None,
                terminate: Callable[[subprocess.Popen], None] | None = None,
                pass_fds: tuple[int, ...] = ()) -> ProcResult:
    """Run argv in its own session; on timeout, output overflow or should_stop, kill the group.

    SIGTERM first, then SIGKILL after `grace_seconds`; `on_kill` lets the caller kill what left
    the group (a cgroup, a container); `terminate` replaces the SIGTERM step for callers that
    must stop their tree in a particular order. Output beyond `output_limit` bytes per stream
    is dropped.
    """
    started = time.monotonic()
    stop_reason: dict[str, bool] = {"output": False}
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.PIPE if stdin else
                            subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, preexec_fn=preexec, close_fds=True,
                            pass_fds=pass_fds)
    wake = threading.Event()  # the process exited, or its output passed the limit
    exited = threading.Event()

    def flag_output() -> None:
        stop_reason["output"] = True
        wake.set()

    def wait_for_exit() -> None:  # woken at once on exit, instead of polling (bench/)
        proc.wait()
        exited.set()
        wake.set()

    readers = [_CappedReader(proc.stdout, output_limit, flag_output),
               _CappedReader(proc.stderr, output_limit, flag_output)]
    for reader in readers:
        reader.start()
    if stdin:
        try:
            proc.stdin.write(stdin)
            proc.stdin.close()
        except BrokenPipeError:
            pass
    threading.Thread(target=wait_for_exit, daemon=True).start()
    timed_out = False
    deadline = started + timeout
    check_every = STOP_CHECK_SECONDS if should_stop is not None else timeout
    while not exited.is_set():
        now = time.monotonic()
        if now >= deadline:
            timed_out = True
            break
        if stop_reason["output"] or (should_stop is not None and should_stop()):
            break
        wake.wait(min(check_every, deadline - now))
    if not exited.is_set():
        if terminate is not None:
            terminate(proc)
        else:
            kill_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(grace_seconds)
        except subprocess.TimeoutExpired:
            pass
    kill_group(proc.pid, signal.SIGKILL)
    if on_kill is not None:
        on_kill()
    proc.wait()
    for reader in readers:
        reader.join(grace_seconds + 1)
    code = proc.returncode
    return ProcResult(exit_code=code, stdout=readers[0].data(), stderr=readers[1].data(),
                      duration_seconds=time.monotonic() - started, timed_out=timed_out,
                      output_exceeded=stop_reason["output"],
                      signal=-code if code is not None and code < 0 else None)
