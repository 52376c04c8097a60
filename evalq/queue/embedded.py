"""The embedded default: the same Celery tasks, a filesystem broker, local workers.

No server runs: messages are files under EVALQ_HOME/broker, results go to SQLite, and
`evalq run` starts worker processes itself, waits until the database shows every planned
trial finished, then stops them. A worker that dies is restarted and pending trials are
re-sent; the database, not the queue, knows what is pending.

The workers live no longer than the `evalq run` that started them: a SIGTERM to it stops them
(and the trials they were running stay pending for `--resume`), and should it die without
running its own cleanup (SIGKILL), each worker gets SIGTERM from the kernel. A worker left
behind would otherwise serve the next study's messages from the same home.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from evalq.config import Settings
from evalq.errors import InfrastructureError
from evalq.proc import kill_group
from evalq.queue.app import QUEUES
from evalq.queue.outage import broker_errors

log = logging.getLogger("evalq.queue.embedded")

WORKER_START_TIMEOUT = 60
#: a worker that exits this soon after starting, this many times in a row, is broken
QUICK_DEATH_SECONDS = 20.0
QUICK_DEATHS = 5
#: after a SIGTERM to `evalq run`: how long its workers may take to stop before SIGKILL
TERMINATE_GRACE_SECONDS = 5.0
#: exit status of an `evalq run` ended by SIGTERM (the shell's 128 + signal number)
SIGTERM_EXIT = 128 + signal.SIGTERM


class Terminated(SystemExit):
    """SIGTERM reached the process running local workers: unwinds it through its `finally`
    blocks (which stop the workers) and exits with SIGTERM_EXIT."""


def _parent_death_signal():
    """A preexec function that has the kernel send SIGTERM to the child when its parent
    dies (Linux prctl PR_SET_PDEATHSIG), or None where that is unavailable. The libc
    function is looked up here, before any fork."""
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent died before the call: nobody would signal
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


@dataclass
class LocalWorkers:
    settings: Settings
    concurrency: int
    procs: list[subprocess.Popen]
    started: dict[int, float] = field(default_factory=dict)
    quick_deaths: int = 0
    #: the workers' log level; bench/ asks for INFO to read Celery's "ready." line
    loglevel: str = "WARNING"
    #: the SIGTERM handler before start() installed its own (None: none was installed)
    previous_sigterm: object = None
    terminated: bool = False

    @classmethod
    def start(cls, settings: Settings, concurrency: int = 2,
              loglevel: str = "WARNING") -> "LocalWorkers":
        """Start the workers; from now until stop(), SIGTERM to this process raises
        Terminated (in the main thread only: signal handlers live there)."""
        workers = cls(settings=settings, concurrency=concurrency, procs=[], loglevel=loglevel)
        if threading.current_thread() is threading.main_thread():
            workers.previous_sigterm = signal.signal(signal.SIGTERM, workers._on_sigterm)
        workers.procs.append(workers._spawn(0))
        return workers

    def _on_sigterm(self, signum, frame) -> None:
        self.terminated = True
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second one must not cut stop() short
        os.write(2, b"evalq: SIGTERM: stopping the local workers; trials they were running "
                    b"stay pending (`evalq run MANIFEST --resume` continues the study)\n")
        raise Terminated(SIGTERM_EXIT)

    def _spawn(self, index: int) -> subprocess.Popen:
        env = dict(os.environ)
        env.update(self.settings.env())
        env.pop("EVALQ_BROKER_URL", None)
        self.log_path(index).parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path(index), "ab")
        argv = [sys.executable, "-m", "celery", "-A", "evalq.queue.app", "worker",
                "-Q", ",".join(QUEUES), "-c", str(self.concurrency), "-P", "prefork",
                "-n", f"embedded{index}-{os.getpid()}@%h", "--without-gossip",
                "--without-mingle", "--without-heartbeat", "-l", self.loglevel]
        self.started[index] = time.monotonic()
        # -P: never import from the working directory (a folder named evalq there would shadow
        # the package); cwd is the home, which evalq owns
        return subprocess.Popen([argv[0], "-P", *argv[1:]], env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                cwd=str(self.settings.home),
                                preexec_fn=_parent_death_signal())

    def check(self) -> bool:
        """Restart any worker that exited; True when one had to be restarted.

        A worker that keeps dying soon after it starts (a broken install, a bad setting) is not
        restarted forever: after QUICK_DEATHS in a row this raises with the end of its log."""
        restarted = False
        for index, proc in enumerate(self.procs):
            if proc.poll() is not None:
                lived = time.monotonic() - self.started.get(index, 0.0)
                self.quick_deaths = self.quick_deaths + 1 if lived < QUICK_DEATH_SECONDS else 0
                if self.quick_deaths >= QUICK_DEATHS:
                    raise InfrastructureError(
                        f"the local workers keep dying at start ({self.quick_deaths} times; "
                        f"last: {self._last_log_line(index)}); see "
                        f"{self.settings.home / 'logs'}")
                self.procs[index] = self._spawn(index)
                restarted = True
        return restarted

    def log_path(self, index: int) -> Path:
        return self.settings.home / "logs" / f"embedded-worker-{index}.log"

    def _last_log_line(self, index: int) -> str:
        path = self.log_path(index)
        try:
            lines = [line for line in path.read_text(errors="replace").splitlines()
                     if line.strip()]
        except OSError:
            return "no log"
        return lines[-1][:300] if lines else "empty log"

    def stop(self, grace: float = 15.0) -> None:
        """Warm shutdown (each worker finishes what it runs), then SIGKILL to each worker's
        whole process group once `grace` is over (TERMINATE_GRACE_SECONDS after a SIGTERM):
        its pool processes too, whatever state they are in. Puts back the SIGTERM handler
        start() replaced."""
        if self.terminated:
            grace = min(grace, TERMINATE_GRACE_SECONDS)
        for proc in self.procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)  # warm shutdown: finish, then exit
        end = time.monotonic() + grace
        for proc in self.procs:
            if proc.returncode is not None:  # reaped before: its pid may name another group now
                continue
            _exited_or_deadline(proc, end)
            kill_group(proc.pid)  # the group outlives its leader while a pool process is left
            proc.wait()
        if self.previous_sigterm is not None:
            signal.signal(signal.SIGTERM, self.previous_sigterm)
            self.previous_sigterm = None


def _exited_or_deadline(proc: subprocess.Popen, end: float) -> None:
    """Wait until the worker has exited or `end` has passed, without reaping it: while it is
    a zombie its pid, which is its process group's id, cannot be given to another process, so
    the group can still be killed safely."""
    stat = Path(f"/proc/{proc.pid}/stat")
    while time.monotonic() < end:
        try:
            text = stat.read_text()
        except OSError:  # no /proc here (or already reaped): wait the usual way
            try:
                proc.wait(max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            return
        if text[text.rindex(")") + 2:].startswith("Z"):
            return
        time.sleep(0.05)


def wait_for_study(count_finished: Callable[[], tuple[int, int]], on_progress,
                   workers: LocalWorkers | None = None, resend: Callable[[], None] | None = None,
                   poll: float = 0.25, timeout: float | None = None,
                   stall_seconds: float = 90.0,
                   sweep: Callable[[], None] | None = None,
                   stop_when: Callable[[], bool] | None = None) -> tuple[int, int]:
    """Poll the database until every planned trial has an outcome; returns (finished, planned).

    After a worker restart, or when nothing finished for `stall_seconds` (a lost message, an
    expired lease), pending trials are re-sent; claims keep a re-sent trial from running twice.
    `sweep`, called on every poll, re-sends what the database shows stranded (expired leases,
    lost grading messages). While the database is unreachable the loop keeps waiting.
    `stop_when` ends the wait early (a cancelled study whose running attempts have stopped).
    """
    from sqlalchemy.exc import DBAPIError

    started = time.monotonic()
    last = (-1, -1)
    last_change = time.monotonic()
    while True:
        try:
            finished, planned = count_finished()
        except DBAPIError:
            time.sleep(max(poll, 1.0))
            continue
        if sweep is not None:
            sweep()
        if (finished, planned) != last:
            on_progress(finished, planned)
            last = (finished, planned)
            last_change = time.monotonic()
        if finished >= planned:
            return finished, planned
        try:
            if stop_when is not None and stop_when():
                return finished, planned
        except DBAPIError:
            pass
        restarted = workers is not None and workers.check()
        stalled = time.monotonic() - last_change > stall_seconds
        if resend is not None and (restarted or stalled):
            try:
                resend()
            except broker_errors() as exc:  # the broker is away: try again after another stall
                log.warning("could not re-send pending trials (%s: %s); will try again",
                            type(exc).__name__, exc)
            last_change = time.monotonic()
        if timeout is not None and time.monotonic() - started > timeout:
            return finished, planned
        time.sleep(poll)
