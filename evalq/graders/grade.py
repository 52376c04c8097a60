"""Grading: hidden tests over a fresh copy of the final workspace, in a sandbox, to one outcome.

Outcome rules: the hidden tests pass ⇒ correct; they fail ⇒ incorrect; the
grader hits its time, memory, process or output limit, crashes, cannot start, or produces no
report ⇒ grading_failure with the reason. A grading failure says nothing about the agent.
Judged apart, what counts as the grader crashing is graders/judge_status.py's to say.
"""

from __future__ import annotations

import dataclasses
import os
import random
import re
import secrets
from pathlib import Path

from evalq.errors import SandboxError
from evalq.fixtures.fixture import Fixture, materialize
from evalq.fixtures.overlay import apply_overlay, copy_tree
from evalq.models import Criterion, GradeResult, Outcome
from evalq.graders.canary import Canaries, plant
from evalq.graders.protect import matches, protected_patterns, reset_grader_files
from evalq.graders.judge_status import missing_verdict, quoted, unexplained_exit
from evalq.graders.source_copy import copy_source
from evalq.graders.split import copy_helpers, run_split
from evalq.graders.tamper import evidence as tamper_evidence, files_digest, listed, without_canaries
from evalq.graders.test_reports import ReportError, parse_junit, parse_tap
from evalq.graders.sandbox import get_sandbox
from evalq.graders.sandbox.scratch import FULL_BELOW_BYTES, grading_folder
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
#: 4: hidden tests' files and source read judge-side; 3: judge/subject split, canaries;
#: 2: grader files reset
GRADER_VERSION = "evalq-grader/4"
#: items of one kind (reset, dropped) named in a reason
NOTED_ITEMS = 10
#: MB of the judge's own report disk (its JUnit report is refused past 5 MB anyway)
JUDGE_REPORT_MB = 16


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
    """Grade `workdir` (already a fresh copy): with the hidden tests as a judge apart from the
    agent's code (verdict = "judge"), or overlaid on it after resetting the runner's files
    (in-process). What had to be reset is recorded in the reason."""
    grade = fixture.spec.grade
    if grade.verdict == "harbor":  # a Harbor task's verifier in its own environment
        from evalq.graders.harbor_verifier import run_verifier

        return run_verifier(fixture, workdir, sandbox, label, dict(GRADER_ENV))
    hidden = workdir.parent / "hidden"
    copy_tree(fixture.hidden_dir, hidden)
    canaries = plant(hidden, random.Random(secrets.randbits(64)))
    canaries.complete = not selects_checks(grade.command)
    if grade.split:
        return _run_judged(fixture, workdir, hidden, canaries, sandbox, label)
    patterns = protected_patterns(fixture.spec.toolchain, grade.protected)
    reset = reset_grader_files(workdir, fixture.workspace_dir, hidden, patterns)
    return _noted(_run_overlaid(fixture, workdir, hidden, canaries, sandbox, label, patterns),
                  "reset before grading", reset)


def selects_checks(command: list[str]) -> bool:
    """Whether a test command runs only some checks of the files it names (pytest's -k, -m,
    --deselect, file::name): then a real check missing from its report is not evidence."""
    args = command[command.index("pytest") + 1:] if "pytest" in command else command
    return any(part.startswith(("-k", "-m", "--deselect")) or "::" in part for part in args)


def _noted(result: GradeResult, heading: str, items: list[str]) -> GradeResult:
    """Append what the grader changed in the agent's workspace to the reason, for the record."""
    if items:
        more = f"; and {len(items) - NOTED_ITEMS} more" if len(items) > NOTED_ITEMS else ""
        note = f"{heading}: " + "; ".join(items[:NOTED_ITEMS]) + more
        result.reason = f"{result.reason}; {note}" if result.reason else note
    return result


def _run_overlaid(fixture: Fixture, workdir: Path, hidden: Path, canaries: Canaries,
                  sandbox: Sandbox, label: str, patterns) -> GradeResult:
    tops = [workdir / entry.name for entry in hidden.iterdir()]
    apply_overlay(hidden, workdir)

    def placed() -> list[Path]:  # listed anew each time: a file added later counts too
        # a top swapped for a link (to a host file or tree) is digested as the link, unfollowed
        return [p for top in tops for p in (listed(top) if top.is_dir() and not top.is_symlink()
                                            else [top])
                if "__pycache__" not in p.parts]

    def runner_files() -> list[Path]:
        return [p for p in listed(workdir) if matches(p.relative_to(workdir).as_posix(),
                                                      patterns) and p not in placed()]

    report_dir = workdir.parent / "report"
    report_dir.mkdir()
    grade = fixture.spec.grade
    argv = [part.replace("{report_dir}", REPORT_PATH) for part in grade.command]
    digests = {"hidden_tests_before": files_digest(placed(), workdir),
               "grader_files_before": files_digest(runner_files(), workdir)}
    try:
        result = sandbox.run(argv, workspace=workdir, report_dir=report_dir,
                             limits=limits_for(fixture), env=dict(GRADER_ENV),
                             image=fixture.spec.image, label=label)
    except SandboxError as exc:
        return GradeResult(outcome=Outcome.grading_failure, reason=f"sandbox: {exc}",
                           sandbox=sandbox.name, verdict="in-process")
    digests.update(hidden_tests_after=files_digest(placed(), workdir),
                   grader_files_after=files_digest(runner_files(), workdir))
    return _verdict(fixture, result, report_dir, canaries, digests, sandbox, "in-process")


def _run_judged(fixture: Fixture, workdir: Path, hidden: Path, canaries: Canaries,
                sandbox: Sandbox, label: str) -> GradeResult:
    judge_dir = workdir.parent / "judge"
    judge_dir.mkdir()
    hidden = hidden.rename(judge_dir / "hidden")
    report_dir = workdir.parent / "report"
    report_dir.mkdir()
    helpers = copy_helpers(workdir.parent)
    source = copy_source(workdir, workdir.parent)  # before any of the agent's code runs
    limits = limits_for(fixture)
    # the judge's report gets a disk of its own: else the subject, whose workspace shares the
    # grading's capped disk, could fill it so that no report can be written (grading_failure)
    with sandbox.scratch(report_dir, dataclasses.replace(limits, disk_mb=JUDGE_REPORT_MB)):
        return _judged_in(fixture, workdir, hidden, judge_dir, report_dir, helpers, source,
                          canaries, sandbox, label, limits)


def _judged_in(fixture: Fixture, workdir: Path, hidden: Path, judge_dir: Path,
               report_dir: Path, helpers: Path, source: Path, canaries: Canaries,
               sandbox: Sandbox, label: str, limits: SandboxLimits) -> GradeResult:
    # the grader files are the helpers' copy: what the judge and the subject have bound
    tests, helper_files = listed(hidden), listed(helpers)
    digests = {"hidden_tests_before": files_digest(tests, hidden),
               "grader_files_before": files_digest(helper_files, helpers)}
    try:
        run = run_split(sandbox, toolchain=fixture.spec.toolchain, command=fixture.spec.grade.command,
                        workdir=workdir, judge_dir=judge_dir, report_dir=report_dir,
                        helpers=helpers, source=source, limits=limits, env=dict(GRADER_ENV),
                        image=fixture.spec.image, label=label)
    except SandboxError as exc:
        return GradeResult(outcome=Outcome.grading_failure, reason=f"sandbox: {exc}",
                           sandbox=sandbox.name, verdict="judge")
    digests.update(hidden_tests_after=files_digest(tests, hidden),
                   grader_files_after=files_digest(helper_files, helpers))
    result = _verdict(fixture, run.judge, report_dir, canaries, digests, sandbox, "judge")
    if run.subject_error:  # the grader could not give the judge its subject: not the agent's
        result.outcome, result.reason = Outcome.grading_failure, run.subject_error
    if run.subject is not None and run.subject.stderr.strip():
        result.output_tail += "\n[subject stderr]\n" + run.subject.stderr[-1000:].strip()
    return result


def _verdict(fixture: Fixture, result: ExecResult, report_dir: Path, canaries: Canaries,
             digests: dict[str, str], sandbox: Sandbox, verdict: str) -> GradeResult:
    """Parse the report, look for tampering, and map everything to one outcome."""
    grade = fixture.spec.grade
    criteria: list[Criterion] | None
    judged = verdict == "judge"
    problem = missing_verdict(result, report_dir, "junit.xml") if judged else None
    try:
        if problem:
            criteria = None
        elif grade.report == "junit" or grade.split:
            criteria = parse_junit(report_dir / "junit.xml")
        else:
            criteria = parse_tap(result.stdout)
    except ReportError as exc:
        criteria, problem = None, quoted(f"the judge's {exc}", result) if judged else str(exc)
    forged = tamper_evidence(criteria, canaries, digests) if problem is None else None
    real = without_canaries(criteria, canaries) if criteria is not None else None
    if forged:
        outcome, reason = Outcome.incorrect, f"tampered: {forged}"
    else:
        # the canaries failed, as they must: the runner's "some tests failed" is theirs
        exited = dataclasses.replace(result, exit_code=0) if (
            canaries.names and result.exit_code == 1 and result.signal is None) else result
        outcome, reason = classify(exited, real, problem)
        if judged and outcome == Outcome.incorrect:
            crashed = unexplained_exit(exited, real)
            outcome, reason = (Outcome.grading_failure, crashed) if crashed else (outcome, reason)
        if verdict == "in-process" and outcome == Outcome.grading_failure and \
                not _limit_reached(result, report_dir):
            outcome, reason = Outcome.incorrect, (
                f"the test run, with the agent's code loaded in it, gave no verdict: {reason}")
    tail = (result.stdout[-2000:] + ("\n" + result.stderr[-1000:] if result.stderr else ""))
    return GradeResult(outcome=outcome, reason=reason, criteria=real or [],
                       exit_code=result.exit_code, duration_seconds=result.duration_seconds,
                       sandbox=sandbox.name, output_tail=tail.strip(), verdict=verdict,
                       tampered=bool(forged) if criteria is not None or forged else None,
                       digests=digests,
                       toolchain=result.toolchain.record() if result.toolchain else None)


def _limit_reached(result: ExecResult, report_dir: Path) -> bool:
    """Whether the sandbox stopped the run at a limit (or its disk is full): a grading_failure.

    Run in-process, the agent's code is loaded into the test runner, so a runner that ends by
    itself without a usable report (os._exit(0) at import, a kill of its own process, a report
    overwritten with garbage, every check skipped) did so at that code's hands: `incorrect`, or
    a wrong solution could hide as a grading_failure, which is counted apart."""
    if result.limit_hit or result.timed_out:
        return True
    try:
        stats = os.statvfs(report_dir)
    except OSError:
        return False
    return stats.f_bavail * stats.f_frsize < FULL_BELOW_BYTES


def _backend_stayed(backend: Sandbox, result: GradeResult) -> GradeResult:
    """A grading_failure if the backend is gone once the run is over: an engine stopping stops
    its containers too (SIGTERM), and what that leaves is no verdict on the agent: judged
    apart, the judge fails its remaining checks on a subject that 'died'; in-process, the
    runner is 'killed by a signal', which is `incorrect` there (graded code can do that)."""
    if result.outcome == Outcome.grading_failure:
        return result
    ok, why = backend.available()
    if not ok:
        result.outcome, result.tampered = Outcome.grading_failure, None
        result.reason = f"sandbox went away during the run (its verdict is void): {why}"
    return result


def _grade_in_tempdir(fixture: Fixture, fill, sandbox: str | Sandbox | None, label: str,
                      ) -> GradeResult:
    backend = sandbox if isinstance(sandbox, Sandbox) else get_sandbox(sandbox)
    limits = limits_for(fixture)
    with grading_folder() as tmp, backend.scratch(tmp, limits) as scratch:
        workdir = tmp / "workspace"
        dropped = fill(workdir)
        result = run_hidden_tests(fixture, workdir, backend, label)
        result = _backend_stayed(backend, result)
        if result.outcome == Outcome.grading_failure and scratch.full():
            result.reason = f"grader exceeded its disk limit ({limits.disk_mb} MB)"
        result = _noted(result, "dropped before grading", dropped)
        return printable(_noted(result, "sandbox", [scratch.note] if scratch.note else []))


#: control characters other than newline and tab: C0, DEL and C1 (ESC starts terminal codes,
#: CR rewrites the current line)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(result: GradeResult) -> GradeResult:
    """The grade with control characters in its free text shown as escapes (\\x1b): reasons
    name the agent's files, and evidence and the output tail hold what graded code printed,
    so raw, they could rewrite what `evalq fixtures grade` or a report shows on a terminal
    (a line overwritten with "correct")."""
    def clean(text: str | None) -> str | None:
        return text if text is None else _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)

    result.reason, result.output_tail = clean(result.reason), clean(result.output_tail) or ""
    result.criteria = [c.model_copy(update={"name": clean(c.name), "evidence": clean(c.evidence)})
                       for c in result.criteria]
    return result


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

