"""Grading a Harbor task: its `tests/test.sh` as the judge, in a fresh sandbox of the task's
pristine environment with only the agent's workspace carried over.

The sandbox's root is the task environment's tree (bubblewrap) or the image imported from
it (Docker), whose digest must equal the one pinned at import. The agent's final workspace
is mounted where the environment keeps it (its WORKDIR), the verifier's files read-only at
/tests (never part of the agent's world), and /logs/verifier is the report folder the reward
is read from. A reward at or over the threshold is `correct`; the reward itself is kept as
the run's `reward` criterion, so partial credit is not lost.

The verifier runs the agent's code in its own process, as Harbor does: a run that ends
without a reward, or at one of the sandbox's limits, is `incorrect` (the self-check shows the
verifier itself ending within them); only a sandbox that cannot start or a backend that goes
away makes a grading_failure.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from evalq.errors import SandboxError, UserError
from evalq.fixtures.fixture import Fixture
from evalq.fixtures.overlay import copy_tree
from evalq.graders.harbor_settings import HarborSettings, read_settings
from evalq.graders.harbor_tamper import toolchain_changes
from evalq.graders.sandbox.base import ExecResult, RunExtras, Sandbox, SandboxLimits
from evalq.graders.tamper import files_digest, listed, read_regular
from evalq.models import Criterion, GradeResult, Outcome

VERDICT = "harbor"
TESTS_PATH = "/tests"
LOGS_PATH = "/logs/verifier"
#: the verifier is started from the workspace, as Harbor runs it in the container's WORKDIR
RUN_VERIFIER = 'cd "$1" && exec bash /tests/test.sh'
#: a reward file is a number or a small JSON object: more is not read
REWARD_BYTES = 65_536
PIDS = 512
SHOWN = 10


def harbor_limits(fixture: Fixture, settings: HarborSettings) -> SandboxLimits:
    grade = fixture.spec.grade
    return SandboxLimits(timeout_seconds=grade.timeout_seconds, memory_mb=grade.memory_mb,
                         pids=max(grade.pids, 8), cpus=settings.cpus,
                         output_limit_bytes=grade.output_limit_bytes)


def verifier_env(settings: HarborSettings, base: dict[str, str]) -> dict[str, str]:
    """The evalq grader's allow-list, then the environment's own variables (its image's
    ENV), then task.toml's [verifier] env: nothing of the worker's."""
    return {**base, **settings.image_env, **settings.verifier_env, "HOME": "/tmp"}


def read_reward(logs: Path, settings: HarborSettings) -> tuple[float | None, str | None]:
    """(reward, None) or (None, why not). reward.txt wins over reward.json, as in Harbor."""
    text_file, json_file = logs / "reward.txt", logs / "reward.json"
    raw = read_regular(text_file, REWARD_BYTES)
    where = "reward.txt"
    if raw is None:
        raw, where = read_regular(json_file, REWARD_BYTES), "reward.json"
    if raw is None:
        return None, "the verifier wrote no reward (/logs/verifier/reward.txt or reward.json)"
    if len(raw) > REWARD_BYTES:
        return None, f"{where} is over {REWARD_BYTES} bytes"
    text = raw.decode("utf-8", "replace").strip()
    try:
        if where == "reward.txt":
            value = float(text)
        else:
            data = json.loads(text)
            value = data.get(settings.reward_key) if isinstance(data, dict) else None
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                return None, f"reward.json has no number under {settings.reward_key!r}"
            value = float(value)
    except ValueError:
        return None, f"{where} does not hold a number: {text[:60]!r}"
    if not math.isfinite(value):
        return None, f"{where} holds {text[:20]!r}, not a finite number"
    return value, None


def readable_by_all(folder: Path) -> None:
    """Let the sandbox's user read (never write) a copy of the task's files, whatever modes
    they had in the task folder: the verifier runs as uid 65534."""
    for path in [folder, *listed_all(folder)]:
        mode = path.stat().st_mode
        os.chmod(path, mode | (0o555 if path.is_dir() else 0o444))


def listed_all(folder: Path) -> list[Path]:
    return [Path(dirpath) / name for dirpath, dirs, files in os.walk(folder)
            for name in dirs + files]


def _failure(reason: str, sandbox: Sandbox, **extra) -> GradeResult:
    return GradeResult(outcome=Outcome.grading_failure, reason=reason, sandbox=sandbox.name,
                       verdict=VERDICT, **extra)


def run_verifier(fixture: Fixture, workdir: Path, sandbox: Sandbox, label: str,
                 base_env: dict[str, str]) -> GradeResult:
    """Grade `workdir` (a fresh copy of the agent's final workspace) with the task's verifier."""
    try:
        settings = read_settings(fixture.path)
    except UserError as exc:
        return _failure(exc.one_line(), sandbox)
    shadowing = toolchain_changes(workdir, fixture.workspace_dir)
    if shadowing:
        more = f"; and {len(shadowing) - SHOWN} more" if len(shadowing) > SHOWN else ""
        return GradeResult(
            outcome=Outcome.incorrect, sandbox=sandbox.name, verdict=VERDICT, tampered=True,
            reason="tampered: the workspace shadows the verifier's toolchain: "
                   + "; ".join(shadowing[:SHOWN]) + more)
    try:
        toolchain = sandbox.toolchain(fixture.spec.image)
    except SandboxError:
        return _failure(f"the task environment {fixture.spec.image} is not on this machine "
                        f"({sandbox.name}): build it here with `evalq fixtures environment "
                        f"{fixture.path}`", sandbox)
    if toolchain is not None and toolchain.digest != settings.rootfs_digest:
        return _failure(f"the task environment {fixture.spec.image} is {toolchain.digest}, not "
                        f"the pinned {settings.rootfs_digest}: rebuild it with `evalq fixtures "
                        f"import harbor` from the task folder, or re-import", sandbox,
                        toolchain=toolchain.record())
    tests = workdir.parent / "tests"
    copy_tree(fixture.hidden_dir / "tests", tests)
    readable_by_all(tests)
    logs = workdir.parent / "report"
    logs.mkdir()
    before = files_digest(listed(tests), tests)
    extras = RunExtras(ro_binds=((str(tests), TESTS_PATH),),
                       rw_binds=((str(workdir), settings.workdir), (str(logs), LOGS_PATH)))
    try:
        result = sandbox.run(["/bin/sh", "-c", RUN_VERIFIER, "evalq-verifier", settings.workdir],
                             workspace=workdir, report_dir=logs,
                             limits=harbor_limits(fixture, settings),
                             env=verifier_env(settings, base_env), image=fixture.spec.image,
                             label=label, extras=extras)
    except SandboxError as exc:
        return _failure(f"sandbox: {exc}", sandbox)
    digests = {"hidden_tests_before": before,
               "hidden_tests_after": files_digest(listed(tests), tests)}
    return _verdict(result, logs, settings, digests, sandbox)


def _verdict(result: ExecResult, logs: Path, settings: HarborSettings,
             digests: dict[str, str], sandbox: Sandbox) -> GradeResult:
    tail = (result.stdout[-2000:] + ("\n" + result.stderr[-1000:] if result.stderr else ""))
    common = dict(exit_code=result.exit_code, duration_seconds=result.duration_seconds,
                  sandbox=sandbox.name, output_tail=tail.strip(), verdict=VERDICT,
                  digests=digests,
                  toolchain=result.toolchain.record() if result.toolchain else None)
    if result.limit_hit or result.timed_out:
        # the verifier ran the agent's code, and the task's self-check shows it ending within
        # its limits on the oracle and on the untouched workspace: a limit hit is that code's
        # doing, as in Harbor, and as a grading_failure it would take the run out of the rates
        return GradeResult(outcome=Outcome.incorrect, tampered=False,
                           reason=f"the verifier, running the agent's code, hit its "
                                  f"{result.limit_hit or 'time'} limit", **common)
    if digests["hidden_tests_before"] != digests["hidden_tests_after"]:
        return GradeResult(outcome=Outcome.incorrect, tampered=True,
                           reason="tampered: the verifier's files changed during the run",
                           **common)
    reward, problem = read_reward(logs, settings)
    if reward is None:
        return GradeResult(outcome=Outcome.incorrect, tampered=False,
                           reason=f"the verifier, with the agent's code run by it, gave no "
                                  f"verdict: {problem}", **common)
    passed = reward >= settings.reward_threshold
    criterion = Criterion(index=0, name="reward", passed=passed,
                          evidence=f"reward {reward:g} (correct at {settings.reward_threshold:g}"
                                   " or more)")
    reason = None if passed else (f"reward {reward:g} is under the threshold "
                                  f"{settings.reward_threshold:g}")
    return GradeResult(outcome=Outcome.correct if passed else Outcome.incorrect, reason=reason,
                       criteria=[criterion], tampered=False, **common)
