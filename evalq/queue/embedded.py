"""The embedded default (SPEC D5): the same Celery tasks, a filesystem broker, local workers.

No server runs: messages are files under EVALQ_HOME/broker, results go to SQLite, and
`evalq run` starts worker processes itself, waits until the database shows every planned
trial finished, then stops them. A worker that dies is restarted and pending trials are
re-sent; the database, not the queue, knows what is pending.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from evalq.config import Settings
from evalq.errors import InfrastructureError
from evalq.queue.app import QUEUES
from evalq.queue.outage import broker_errors

log = logging.getLogger("evalq.queue.embedded")

WORKER_START_TIMEOUT = 60
#: a worker that exits this soon after starting, this many times in a row, is broken
QUICK_DEATH_SECONDS = 20.0
QUICK_DEATHS = 5


@dataclass
class LocalWorkers:
    settings: Settings
    concurrency: int
    procs: list[subprocess.Popen]
    started: dict[int, float] = field(default_factory=dict)
    quick_deaths: int = 0
    #: the workers' log level; bench/ asks for INFO to read Celery's "ready." line
    loglevel: str = "WARNING"

    @classmethod
    def start(cls, settings: Settings, concurrency: int = 2,
              loglevel: str = "WARNING") -> "LocalWorkers":
        workers = cls(settings=settings, concurrency=concurrency, procs=[], loglevel=loglevel)
        workers.procs.append(workers._spawn(0))
        return workers

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
                                cwd=str(self.settings.home))

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
        for proc in self.procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)  # warm shutdown: finish, then exit
        end = time.monotonic() + grace
        for proc in self.procs:
            try:
                proc.wait(max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


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
