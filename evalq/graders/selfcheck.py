"""A grading worker checks itself on a fixture before it grades that fixture's first trial.

A grader can be wrong in a way no single grade shows (a toolchain image in which the hidden
tests cannot pass, a judge that cannot start, a workspace the sandbox does not see): every
trial then looks like the agent's fault, and a report built on that is plausible and false.
So a worker process grades the fixture's own reference solutions first, with the code
`evalq fixtures check` uses (fixtures/selfcheck.py): the correct one must come out `correct`,
the incorrect one `incorrect`. Until they do, it refuses the fixture's trials, which stay
pending with no outcome (graders/service.py gives them back to be re-sent).

A verdict is kept per process, keyed by what decides a verdict: the fixture's digest, the
sandbox backend and the toolchain (rootfs or image digest) the fixture grades in now, so a
re-imported image or a rebuilt rootfs is checked anew. A passing check lasts the process's
life, and is noted for the worker's other pool processes (same parent, same machine or
container): one pair of gradings per fixture per worker. A failed one is tried again when a trial
of the fixture arrives `retry_after` seconds or more later, so a fault that goes away without
changing the key (an engine restarted) stops blocking.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from evalq.errors import SandboxError
from evalq.fixtures.fixture import Fixture
from evalq.fixtures.selfcheck import check_fixture
from evalq.graders.sandbox.base import Sandbox
from evalq.graders.sandbox.owner import pid_namespace, process_start

log = logging.getLogger("evalq.grading")

#: the references a worker grades: the two whose verdicts a misconfigured grader gets wrong
PAIR = ("correct", "incorrect")
#: characters of a refusal's reason kept (it names what the graded references printed)
REASON_CHARS = 1000


class GraderRefused(Exception):
    """This grader will not grade a fixture's trials: its self-check of the fixture failed.
    Not an EvalqError: it is no verdict on the trial, which must not get an outcome from it."""


@dataclass(frozen=True)
class Verdict:
    """One self-check's result: `reason` says why it failed (None when ok)."""

    fixture_id: str
    fixture_digest: str
    sandbox: str
    toolchain: Optional[str]
    ok: bool
    reason: Optional[str]
    verdicts: dict
    checked_at: float  # time.time(), for people
    checked_mono: float  # time.monotonic(), for the retry

    def row(self, grader: str) -> dict:
        """The grader_checks row of this verdict (results/grader_checks.py)."""
        return {"grader": grader, "fixture_digest": self.fixture_digest,
                "fixture_id": self.fixture_id, "sandbox": self.sandbox,
                "toolchain": self.toolchain, "ok": self.ok, "reason": self.reason,
                "verdicts": self.verdicts, "checked_at": self.checked_at}


def refusal(grader: str, verdict: Verdict) -> str:
    return f"grader {grader} refuses fixture {verdict.fixture_id}: {verdict.reason}"


def toolchain_digest(backend: Sandbox, image: str) -> Optional[str]:
    """The digest of the rootfs or image `image` grades in now, with the Docker image's id
    (an image made from another keeps its digest label); None if it cannot be found (the
    gradings then fail for the same reason, and say it)."""
    try:
        toolchain = backend.toolchain(image)
    except SandboxError:
        return None
    if toolchain is None:
        return None
    return " ".join(p for p in (toolchain.digest, toolchain.image_id) if p) or None


def run_check(fixture: Fixture, backend: Sandbox, toolchain: Optional[str]) -> Verdict:
    """Grade the fixture's PAIR of references; a check that cannot run is a failed one."""
    verdicts: dict = {}
    try:
        check = check_fixture(fixture, sandbox=backend, references=PAIR)
        verdicts, reason = dict(check.verdicts or {}), "; ".join(check.failures or []) or None
    except Exception as exc:  # noqa: BLE001 - whatever stops the check is a reason to refuse
        reason = f"the self-check could not run: {type(exc).__name__}: {exc}"
    if reason is not None and len(reason) > REASON_CHARS:
        reason = reason[:REASON_CHARS] + " …"
    return Verdict(fixture_id=fixture.id, fixture_digest=fixture.digest, sandbox=backend.name,
                   toolchain=toolchain, ok=reason is None, reason=reason, verdicts=verdicts,
                   checked_at=time.time(), checked_mono=time.monotonic())


class SelfCheckGate:
    """This process's self-check verdicts; `require` before grading a trial of a fixture."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Empty: at start, and in a forked child (a pool process checks for itself)."""
        self.lock = threading.Lock()
        self.key_locks: dict[tuple, threading.Lock] = {}
        self.verdicts: dict[tuple, Verdict] = {}

    def require(self, fixture: Fixture, backend: Sandbox, grader: str, retry_after: float,
                record: Callable[[dict], None] | None = None) -> Optional[Verdict]:
        """The passing verdict for this fixture here, checking first if there is none (one
        check at a time per key: trials arriving together wait for it). GraderRefused with
        the reason if the check fails. None, with no check, while the backend itself is
        unavailable (a Docker engine that is down): a grader that cannot run at all is not
        one that judges wrongly, and the trial's own grading then records a grading_failure
        naming why (counted apart, regraded later), where a refusal would leave it pending
        and a foreground `evalq run` waiting with nothing to show."""
        ready, why = backend.available()
        if not ready:
            log.warning("no self-check of fixture %s: the %s sandbox is unavailable (%s)",
                        fixture.id, backend.name, why)
            return None
        toolchain = toolchain_digest(backend, fixture.spec.image)
        key = (fixture.digest, backend.name, toolchain)
        with self.lock:
            key_lock = self.key_locks.setdefault(key, threading.Lock())
        with key_lock:
            verdict = self.verdicts.get(key)
            if verdict is None and _passed_nearby(key):
                verdict = self.verdicts[key] = Verdict(
                    fixture_id=fixture.id, fixture_digest=fixture.digest, sandbox=backend.name,
                    toolchain=toolchain, ok=True, reason=None, verdicts={},
                    checked_at=time.time(), checked_mono=time.monotonic())
            if verdict is None or (not verdict.ok and
                                   time.monotonic() - verdict.checked_mono >= retry_after):
                log.info("self-check of fixture %s in process %d (%s, toolchain %s): grading "
                         "its references", fixture.id, os.getpid(), backend.name, toolchain)
                verdict = self.verdicts[key] = run_check(fixture, backend, toolchain)
                if verdict.ok:
                    log.info("self-check of fixture %s passed", fixture.id)
                    _mark_passed(key)
                else:
                    log.error("self-check of fixture %s failed: %s", fixture.id,
                              refusal(grader, verdict))
                if record is not None:
                    record(verdict.row(grader))
        if not verdict.ok:
            raise GraderRefused(refusal(grader, verdict))
        return verdict


def _pass_mark(key: tuple) -> Path:
    """Where a pass is noted for the other pool processes of this worker: the same parent
    process in the same machine or container (pid namespace and host name), the same fixture,
    backend and toolchain. The parent is named by its pid and its start time: pids are reused
    (a machine that has run some 32,000 processes gives a new worker an old one's pid), and a
    restarted worker must check anew. A failure is never shared: each process finds its own."""
    parent = os.getppid()
    ident = hashlib.sha256(repr((pid_namespace(), socket.gethostname(), parent,
                                 process_start(parent), key)).encode())
    return Path(tempfile.gettempdir()) / "evalq-selfcheck" / ident.hexdigest()[:32]


def _passed_nearby(key: tuple) -> bool:
    return key[2] is not None and _pass_mark(key).is_file()


def _mark_passed(key: tuple) -> None:
    if key[2] is None:  # no toolchain digest: nothing to tell a changed toolchain apart by
        return
    mark = _pass_mark(key)
    try:
        mark.parent.mkdir(mode=0o700, exist_ok=True)
        mark.touch()
    except OSError as exc:  # the other processes then check for themselves
        log.info("could not note the self-check's pass for this worker's other processes: %s",
                 exc)


GATE = SelfCheckGate()
os.register_at_fork(after_in_child=GATE.reset)
