"""Split grading: the judge (hidden tests) and the subject (agent's code) in two sandboxes.

The trusted grader process makes a socket pair and starts both: the subject as the sandbox
user with the agent's workspace as its only project view, the judge as a second user with the
hidden tests, the report directory and evalq's judge helpers, but no workspace: a copy of it
taken before the subject started (graders/source_copy.py) for static checks, and a folder both
share (SHARED_MOUNT) where the judge itself writes the files a check hands to the subject's
code and reads back what that code wrote (judge/files.py). The helpers are
bound read-only from a copy in the grading's own folder (copy_helpers), never from this
installed package: a grader that runs in a container asks the host's engine for its binds, and
the engine sees the grading folder at the same path, but not the grader's site-packages. The
socket carries JSON data only (judge/codec.py); the subject has no way to call into the judge,
since the judge only ever sends requests and reads answers.
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from evalq.errors import SandboxError
from evalq.graders.judge.client import KIND_ENV
from evalq.graders.judge.files import SHARED_ENV
from evalq.graders.judge.source import SOURCE_ENV
from evalq.graders.relay import SOCKET_NAME, Relay
from evalq.graders.sandbox.base import (REPORT_PATH, WORKSPACE_PATH, ExecResult, RunExtras,
                                        Sandbox, SandboxLimits)

#: evalq's judge helpers, as installed: copied per grading (copy_helpers), never bound from here
JUDGE_PACKAGE = Path(__file__).resolve().parent / "judge"
#: what of the package is copied: its own source files (no bytecode caches, nothing else)
HELPER_SUFFIXES = (".py", ".js")
#: the copy's name in the grading folder, beside the workspace, judge and report folders
HELPERS_DIR = "judge-helpers"
JUDGE_MOUNT = "/evalq-judge/evalq_judge"
SUBJECT_MOUNT = "/evalq-subject"
#: the folder judge and subject share, at the same path in both (paths cross as data)
SHARED_DIR = "shared"
SHARED_MOUNT = "/evalq-shared"
#: the judge's copy of the workspace as handed in (read-only, the judge's alone)
SOURCE_MOUNT = "/evalq-source"
#: The judge runs as its own user, never the subject's (65534, nobody).
JUDGE_UID = 65533
SUBJECT_UID = 65534
#: How the subject process is started, per toolchain (make fixtures' programs run under Python).
SUBJECT_ARGV = {"node": ["node", f"{SUBJECT_MOUNT}/subject_server.js"]}
PYTHON_SUBJECT = ["python3", "-I", "-B", f"{SUBJECT_MOUNT}/subject_server.py"]


#: written by the judge (in its report dir) when the subject server never answered at all
CHANNEL_STATUS = "channel-broken"
#: written by the judge's boot (in its report dir) as its first act (graders/judge_status.py)
STARTED_MARK = "judge-started"
#: Of the grader's time limit, what the judge keeps for itself after its last wait on the
#: subject (start-up, failing the remaining checks at once, writing the report): a fraction,
#: within these bounds in seconds.
JUDGE_RESERVE = (0.3, 4.0, 20.0)
#: The judge's terminal output stops here (a note says how much was cut), well under the
#: grader's output limit: what it prints depends on the subject's answers.
JUDGE_OUTPUT_SHARE = 0.5


#: below this many seconds for answers, no deadline is set (the limit leaves no reserve)
MIN_ANSWER_SECONDS = 2.0


def answers_budget(limits: SandboxLimits) -> float | None:
    """Seconds the judge may wait for its subject in all (judge/client.py), so that a subject
    that is slow, hangs in every call or floods the channel fails its checks and the judge
    still ends within its own time limit (which would be a grading_failure, counted apart);
    None when the limit is too short to keep the judge a reserve."""
    share, low, high = JUDGE_RESERVE
    budget = limits.timeout_seconds - min(max(limits.timeout_seconds * share, low), high)
    return budget if budget >= MIN_ANSWER_SECONDS else None


def deadline_env(limits: SandboxLimits, now: float | None = None) -> dict[str, str]:
    budget = answers_budget(limits)
    if budget is None:
        return {}
    at = (time.time() if now is None else now) + budget
    return {"EVALQ_SUBJECT_DEADLINE": repr(at), "EVALQ_SUBJECT_BUDGET": repr(budget)}


@dataclass
class SplitRun:
    judge: ExecResult
    subject: ExecResult | None
    subject_error: str | None = None


def copy_helpers(grading: Path) -> Path:
    """Copy the judge package's source files into the grading folder; return the copy, which
    is what the judge and the subject get bound (read-only) and what the tamper digests cover.
    Readable by both sandbox users, writable by neither. A linked file of the installed
    package (some installers link) is copied as its content: the package is evalq's own."""
    dest = grading / HELPERS_DIR
    dest.mkdir(mode=0o755)
    os.chmod(dest, 0o755)  # whatever the umask
    for source in sorted(JUDGE_PACKAGE.iterdir()):
        if source.suffix in HELPER_SUFFIXES and source.is_file():
            shutil.copyfile(source, dest / source.name)
            os.chmod(dest / source.name, 0o644)
    return dest


def make_shared(grading: Path) -> Path:
    """The folder judge and subject share: the judge's (it makes a folder in it per check
    that needs one); the subject may not add to it, only to the folders the judge opens to it.
    Without root to give it to the judge's user, both sandboxes run as the caller and it is
    open to both."""
    shared = grading / SHARED_DIR
    shared.mkdir(mode=0o755)
    if os.geteuid() == 0:
        os.chown(shared, JUDGE_UID, JUDGE_UID)
        os.chmod(shared, 0o755)
    else:
        os.chmod(shared, 0o777)
    return shared


def judge_argv(command: list[str]) -> list[str]:
    """`command` in judge mode is `pytest ARGS...`: the ARGS run from the hidden tests' copy."""
    if not command or command[0] != "pytest":
        raise SandboxError("a fixture with verdict = \"judge\" needs grade.command = "
                           "[\"pytest\", ...] (the pytest arguments for its hidden tests)")
    return ["python3", "-I", "-B", f"{JUDGE_MOUNT}/boot.py", f"{WORKSPACE_PATH}/hidden",
            f"{REPORT_PATH}/junit.xml", *command[1:]]


def judge_env(env: dict[str, str]) -> dict[str, str]:
    """The grader's environment without CI: on CI, pytest neither truncates its assertion
    explanations nor its summary lines, and computes full diffs, so a long wrong answer from
    the subject would flood the judge's output past its limit or spend its time diffing."""
    return {k: v for k, v in env.items() if k != "CI"}


def run_split(sandbox: Sandbox, *, toolchain: str, command: list[str], workdir: Path,
              judge_dir: Path, report_dir: Path, helpers: Path, source: Path,
              limits: SandboxLimits, env: dict[str, str], image: str | None,
              label: str) -> SplitRun:
    """Run subject and judge side by side (`helpers`: copy_helpers' copy, `source`:
    copy_source's copy of the workspace); return once both are gone."""
    argv = judge_argv(command)
    shared = make_shared(judge_dir.parent)
    channel = _Channel(sandbox, judge_dir.parent)
    judge_done = threading.Event()
    outcome: dict = {}
    subject_report = judge_dir.parent / "subject-report"
    subject_report.mkdir()

    def subject() -> None:
        try:
            outcome["result"] = sandbox.run(
                [*SUBJECT_ARGV.get(toolchain, PYTHON_SUBJECT), channel.subject_spec,
                 WORKSPACE_PATH], workspace=workdir, report_dir=subject_report, limits=limits,
                env=dict(env), image=image, label=f"{label}:subject",
                extras=RunExtras(ro_binds=((str(helpers), SUBJECT_MOUNT),
                                           *channel.subject_binds),
                                 rw_binds=((str(shared), SHARED_MOUNT),),
                                 pass_fds=channel.subject_fds, uid=SUBJECT_UID,
                                 should_stop=judge_done.is_set))
        except Exception as exc:  # noqa: BLE001 - reported in the grade, never raised here
            outcome["error"] = f"subject sandbox: {exc}"
        finally:
            channel.subject_gone()  # the judge now sees the subject's end of the channel close

    thread = threading.Thread(target=subject, name="evalq-subject", daemon=True)
    thread.start()
    try:
        judge = sandbox.run(argv, workspace=judge_dir, report_dir=report_dir, limits=limits,
                            env={**judge_env(env), "EVALQ_SUBJECT_CHANNEL": channel.judge_spec,
                                 **deadline_env(limits),
                                 "EVALQ_JUDGE_OUTPUT_LIMIT": str(int(
                                     limits.output_limit_bytes * JUDGE_OUTPUT_SHARE)),
                                 # only the plugins the hidden tests ask for (and faster)
                                 "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
                                 "EVALQ_CHANNEL_STATUS": f"{REPORT_PATH}/{CHANNEL_STATUS}",
                                 "EVALQ_JUDGE_STARTED": f"{REPORT_PATH}/{STARTED_MARK}",
                                 SHARED_ENV: SHARED_MOUNT, SOURCE_ENV: SOURCE_MOUNT,
                                 KIND_ENV: "node" if toolchain == "node" else "python"},
                            image=image, label=f"{label}:judge",
                            extras=RunExtras(ro_binds=((str(helpers), JUDGE_MOUNT),
                                                       (str(source), SOURCE_MOUNT),
                                                       *channel.judge_binds),
                                             rw_binds=((str(shared), SHARED_MOUNT),),
                                             pass_fds=channel.judge_fds, uid=JUDGE_UID))
    finally:
        judge_done.set()
        channel.judge_gone()
        thread.join(limits.timeout_seconds + 30)
    if thread.is_alive():
        raise SandboxError("the subject's sandbox did not stop after the judge ended")
    broken = report_dir / CHANNEL_STATUS
    error = outcome.get("error")
    if broken.is_file():
        relay = f" ({channel.relay.error})" if channel.relay and channel.relay.error else ""
        error = error or f"judge-subject channel broke: {broken.read_text()[:300]}{relay}"
        broken.unlink()
    return SplitRun(judge=judge, subject=outcome.get("result"), subject_error=error)


class _Channel:
    """A socket pair passed as file descriptors (bwrap), or a relay between two unix sockets
    bound into the containers (Docker cannot pass a descriptor into a container)."""

    MOUNT = "/evalq-channel"

    def __init__(self, sandbox: Sandbox, folder: Path):
        self.relay = None
        self.judge_binds: tuple = ()
        self.subject_binds: tuple = ()
        self.judge_fds: tuple = ()
        self.subject_fds: tuple = ()
        if getattr(sandbox, "passes_fds", False):
            self.judge_end, self.subject_end = socket.socketpair()
            self.judge_fds, self.subject_fds = (self.judge_end.fileno(),), (self.subject_end.fileno(),)
            self.judge_spec = f"fd:{self.judge_end.fileno()}"
            self.subject_spec = f"fd:{self.subject_end.fileno()}"
            return
        judge_dir, subject_dir = folder / "channel-judge", folder / "channel-subject"
        self.relay = Relay(judge_dir, subject_dir)
        self.judge_binds = ((str(judge_dir), self.MOUNT),)
        self.subject_binds = ((str(subject_dir), self.MOUNT),)
        self.judge_spec = self.subject_spec = f"unix:{self.MOUNT}/{SOCKET_NAME}"

    def subject_gone(self) -> None:
        if self.relay is None:
            self.subject_end.close()
        else:
            self.relay.subject_gone()

    def judge_gone(self) -> None:
        if self.relay is None:
            self.judge_end.close()
        else:
            self.relay.close()
