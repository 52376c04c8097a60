"""Grading: hidden tests over a fresh copy of the final workspace, in a sandbox, to one outcome.

Outcome rules (SPEC G2, G4): the hidden tests pass ⇒ correct; they fail ⇒ incorrect; the
grader hits its time, memory, process or output limit, crashes, cannot start, or produces no
report ⇒ grading_failure with the reason. A grading failure says nothing about the agent.
"""

from __future__ import annotations

from pathlib import Path

from evalq.errors import SandboxError
from evalq.fixtures.fixture import Fixture, materialize
from evalq.fixtures.overlay import apply_overlay
from evalq.models import Criterion, GradeResult, Outcome
from evalq.graders.protect import protected_patterns, reset_grader_files
from evalq.graders.test_reports import ReportError, parse_junit, parse_tap
from evalq.graders.sandbox import get_sandbox
from evalq.graders.sandbox.scratch import grading_folder
from evalq.graders.sandbox.base import REPORT_PATH, ExecResult, Sandbox, SandboxLimits
from evalq.fixtures.archive import copy_workspace, unpack_workspace

#: The whole environment a grader sees: nothing of the worker's environment passes through.
GRADER_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONHASHSEED": "0",
    "NO_COLOR": "1",
    "CI": "true",
}
GRADER_VERSION = "evalq-grader/2"  # 2: grader files reset before the hidden tests run
#: items of one kind (reset, dropped) named in a reason
NOTED_ITEMS = 10


def limits_for(fixture: Fixture) -> SandboxLimits:
    grade = fixture.spec.grade
    return SandboxLimits(timeout_seconds=grade.timeout_seconds, memory_mb=grade.memory_mb,
                         pids=grade.pids, output_limit_bytes=grade.output_limit_bytes)


def classify(result: ExecResult, criteria: list[Criterion] | None,
             report_problem: str | None) -> tuple[Outcome, str | None]:
    """Map what the sandbox saw and the parsed report to exactly one outcome and a reason."""
    if result.limit_hit == "time" or result.timed_out:
        return Outcome.grading_failure, "grader exceeded its time limit"
    if result.limit_hit in ("memory", "pids", "output"):
        return Outcome.grading_failure, f"grader exceeded its {result.limit_hit} limit"
    if report_problem:
        return Outcome.grading_failure, report_problem
    failed = [c for c in criteria or [] if c.passed is False]
    if failed:
        names = ", ".join(c.name for c in failed[:5])
        return Outcome.incorrect, f"{len(failed)} hidden check(s) failed: {names}"
    if result.signal is not None:
        return Outcome.grading_failure, f"grader killed by signal {result.signal}"
    if result.exit_code != 0:
        if criteria:
            return Outcome.incorrect, f"test run exited {result.exit_code} after its checks"
        return Outcome.incorrect, (f"test run exited {result.exit_code} without a test "
                                   "report (build or collection failed)")
    passed = [c for c in criteria or [] if c.passed]
    if not passed:
        return Outcome.grading_failure, "grader reported no passing or failing check"
    return Outcome.correct, None


def run_hidden_tests(fixture: Fixture, workdir: Path, sandbox: Sandbox,
                     label: str = "") -> GradeResult:
    """Reset the grader's files, overlay the hidden tests on `workdir` (already a fresh copy)
    and grade it. What had to be reset is recorded in the reason."""
    grade = fixture.spec.grade
    reset = reset_grader_files(workdir, fixture.workspace_dir, fixture.hidden_dir,
                               protected_patterns(fixture.spec.toolchain, grade.protected))
    return _noted(_run_overlaid(fixture, workdir, sandbox, label), "reset before grading", reset)


def _noted(result: GradeResult, heading: str, items: list[str]) -> GradeResult:
    """Append what the grader changed in the agent's workspace to the reason, for the record."""
    if items:
        more = f"; and {len(items) - NOTED_ITEMS} more" if len(items) > NOTED_ITEMS else ""
        note = f"{heading}: " + "; ".join(items[:NOTED_ITEMS]) + more
        result.reason = f"{result.reason}; {note}" if result.reason else note
    return result


def _run_overlaid(fixture: Fixture, workdir: Path, sandbox: Sandbox, label: str) -> GradeResult:
    apply_overlay(fixture.hidden_dir, workdir)
    report_dir = workdir.parent / "report"
    report_dir.mkdir()
    grade = fixture.spec.grade
    argv = [part.replace("{report_dir}", REPORT_PATH) for part in grade.command]
    try:
        result = sandbox.run(argv, workspace=workdir, report_dir=report_dir,
                             limits=limits_for(fixture), env=dict(GRADER_ENV),
                             image=fixture.spec.image, label=label)
    except SandboxError as exc:
        return GradeResult(outcome=Outcome.grading_failure, reason=f"sandbox: {exc}",
                           sandbox=sandbox.name)
    criteria: list[Criterion] | None
    problem = None
    try:
        if grade.report == "junit":
            criteria = parse_junit(report_dir / "junit.xml")
        else:
            criteria = parse_tap(result.stdout)
    except ReportError as exc:
        criteria, problem = None, str(exc)
    outcome, reason = classify(result, criteria, problem)
    tail = (result.stdout[-2000:] + ("\n" + result.stderr[-1000:] if result.stderr else ""))
    return GradeResult(outcome=outcome, reason=reason, criteria=criteria or [],
                       exit_code=result.exit_code, duration_seconds=result.duration_seconds,
                       sandbox=sandbox.name, output_tail=tail.strip(),
                       toolchain=result.toolchain.record() if result.toolchain else None)


def _grade_in_tempdir(fixture: Fixture, fill, sandbox: str | Sandbox | None, label: str,
                      ) -> GradeResult:
    backend = sandbox if isinstance(sandbox, Sandbox) else get_sandbox(sandbox)
    limits = limits_for(fixture)
    with grading_folder() as tmp, backend.scratch(tmp, limits) as scratch:
        workdir = tmp / "workspace"
        dropped = fill(workdir)
        result = run_hidden_tests(fixture, workdir, backend, label)
        if result.outcome == Outcome.grading_failure and scratch.full():
            result.reason = f"grader exceeded its disk limit ({limits.disk_mb} MB)"
        result = _noted(result, "dropped before grading", dropped)
        return _noted(result, "sandbox", [scratch.note] if scratch.note else [])


def grade_workspace(fixture: Fixture, workspace: Path, *, sandbox: str | Sandbox | None = None,
                    label: str = "") -> GradeResult:
    """Grade a directory (it is copied first; links and special files are dropped)."""
    return _grade_in_tempdir(fixture, lambda dest: copy_workspace(Path(workspace), dest),
                             sandbox, label)


def grade_archive(fixture: Fixture, archive: bytes, *, sandbox: str | Sandbox | None = None,
                  label: str = "") -> GradeResult:
    """Grade a packed workspace from the artifact store."""
    return _grade_in_tempdir(fixture, lambda dest: unpack_workspace(archive, dest), sandbox,
                             label)


def prepare_reference(fixture: Fixture, solution: str | None, dest: Path) -> Path:
    """The initial workspace, with a reference solution's overlay applied when one is named."""
    materialize(fixture, dest)
    if solution is not None:
        apply_overlay(fixture.solution_dir(solution), dest)
    return dest

