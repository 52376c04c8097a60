"""The judge's helpers come from the grading's own folder, and a judge that gave no verdict is
the grader's failure (graders/split.py, graders/judge_status.py).

A grader in a container asks the host's engine for its binds: a bind from evalq's installed
package named a folder the engine does not have, the judge could not open its boot, and both
references of every fixture graded `incorrect`. Here the helpers are broken for real (missing,
unreadable, a boot that dies before its report): each reference is a grading_failure that
quotes the judge's stderr; every bind of a judge or subject lies in the grading folder (or the
toolchain); and a Docker grading whose installed package the engine cannot see still grades
both references right.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hostile_backend import backend, traversable_tempdir  # noqa: F401 (the fixture)

from evalq.fixtures.fixture import freeze_fixture, load_fixture
from evalq.graders import grade, split
from evalq.graders.grade import grade_workspace
from evalq.graders.judge_status import missing_verdict, unexplained_exit
from evalq.graders.sandbox.base import ExecResult
from evalq.graders.sandbox.toolchain import DEFAULT_IMAGE, local_rootfs
from evalq.graders.tamper import files_digest, listed
from evalq.models import Criterion, Outcome
from test_judge_split import make_fixture

REFERENCES = {"correct": Outcome.correct, "incorrect": Outcome.incorrect}


@pytest.fixture(scope="module")
def fixture(tmp_path_factory):
    return make_fixture(tmp_path_factory.mktemp("helpers") / "judge", "judge")


@pytest.fixture(autouse=True)
def grading_tmp(tmp_path, monkeypatch):  # tmp_path first: its base dir is made before the patch
    with traversable_tempdir("evalq-helpers-", monkeypatch) as folder:
        yield folder


def package_copy(root: Path, edit=None) -> Path:
    """A copy of the installed judge package (with a bytecode cache, as installs have), its
    boot.py passed through `edit`."""
    dest = root / "judge-package"
    dest.mkdir(parents=True)
    for source in split.JUDGE_PACKAGE.iterdir():
        if source.is_file():
            (dest / source.name).write_bytes(source.read_bytes())
    (dest / "__pycache__").mkdir()
    (dest / "__pycache__" / "boot.cpython-311.pyc").write_bytes(b"\0" * 64)
    (dest / "notes.txt").write_text("not a source file\n")
    if edit:
        (dest / "boot.py").write_text(edit((dest / "boot.py").read_text()))
    return dest


def no_helpers(root: Path, monkeypatch) -> None:
    empty = root / "judge-package"
    empty.mkdir()
    monkeypatch.setattr(split, "JUDGE_PACKAGE", empty)


def unreadable_boot(root: Path, monkeypatch) -> None:
    def copy(grading: Path) -> Path:
        helpers = split.copy_helpers(grading)
        os.chmod(helpers / "boot.py", 0)  # the grader (root) still reads it; the judge cannot
        return helpers

    monkeypatch.setattr(grade, "copy_helpers", copy)


def boot_dies_after_starting(root: Path, monkeypatch) -> None:
    broken = package_copy(root, lambda text: text.replace("    import pytest\n",
                                                          "    import pytest_not_there\n"))
    monkeypatch.setattr(split, "JUDGE_PACKAGE", broken)


BREAKAGES = {
    "helpers not found": (no_helpers, "the judge never started", "can't open file"),
    "boot unreadable": (unreadable_boot, "the judge never started", "Permission denied"),
    "boot dies after starting": (boot_dies_after_starting,
                                 "the judge ended without writing its report",
                                 "ModuleNotFoundError"),
}


@pytest.mark.parametrize("breakage", list(BREAKAGES))
def test_a_judge_that_gave_no_verdict_is_a_grading_failure(fixture, backend, tmp_path,
                                                           monkeypatch, breakage):
    """For the correct reference and for the incorrect one alike: no verdict on the agent."""
    breaks, says, stderr = BREAKAGES[breakage]
    breaks(tmp_path, monkeypatch)
    for name in REFERENCES:
        graded = grade_workspace(fixture, fixture.solution_dir(name), sandbox=backend)
        assert graded.outcome == Outcome.grading_failure, (name, graded)
        assert graded.reason.startswith(says), (name, graded.reason)
        assert "its stderr ends: " in graded.reason and stderr in graded.reason, graded.reason
        assert graded.tampered is None and graded.criteria == [], graded


EXIT_THREE = "def pytest_sessionfinish(session, exitstatus):\n    session.exitstatus = 3\n"


def test_a_judge_exit_its_report_does_not_explain_is_a_grading_failure(backend, tmp_path):
    """The hidden tests' own conftest ends pytest with status 3 (internal error) after every
    check ran: with no failed check that is the judge's failure (it graded `incorrect`); a
    failed check is still the agent's."""
    fixture = make_fixture(tmp_path / "exit-three", "judge")
    (fixture.hidden_dir / "hidden_tests" / "conftest.py").write_text(EXIT_THREE)
    freeze_fixture(fixture.path)
    fixture = load_fixture(fixture.path)
    correct = grade_workspace(fixture, fixture.solution_dir("correct"), sandbox=backend)
    assert correct.outcome == Outcome.grading_failure, correct
    assert correct.reason.startswith("the judge failed with no failed check in its report "
                                     "(exit status 3)"), correct.reason
    wrong = grade_workspace(fixture, fixture.solution_dir("incorrect"), sandbox=backend)
    assert wrong.outcome == Outcome.incorrect and "test_answer" in wrong.reason, wrong


def bind_sources(backend, monkeypatch) -> list[tuple[str, str]]:
    """(source, target) of every bind the backend asks for from now on: bubblewrap's options
    as passed to it, or each container's mounts as the engine reports them once created."""
    seen: list[tuple[str, str]] = []
    if backend.name == "bwrap":
        from evalq.graders.sandbox import bwrap

        real = bwrap.run_in_bwrap

        def recording(options, argv, **kwargs):
            seen.extend((options[i + 1], options[i + 2]) for i, opt in enumerate(options)
                        if opt in ("--bind", "--ro-bind"))
            return real(options, argv, **kwargs)

        monkeypatch.setattr(bwrap, "run_in_bwrap", recording)
    else:
        from docker.models.containers import ContainerCollection

        real = ContainerCollection.create

        def recording(self, *args, **kwargs):
            container = real(self, *args, **kwargs)
            seen.extend((m["Source"], m["Destination"]) for m in container.attrs["Mounts"]
                        if m.get("Type") == "bind")
            return container

        monkeypatch.setattr(ContainerCollection, "create", recording)
    return seen


def test_every_bind_lies_in_the_grading_folder(fixture, backend, grading_tmp, monkeypatch):
    """Nothing a judge or subject gets bound comes from the installed package (or anywhere
    else the engine of a containerized grader may not have), but for the toolchain's tree; the
    helpers are one copy, bound read-only to both, and digested as the grader files."""
    seen = bind_sources(backend, monkeypatch)
    graded = grade_workspace(fixture, fixture.solution_dir("correct"), sandbox=backend)
    assert graded.outcome == Outcome.correct, graded
    gradings = {Path(src).relative_to(grading_tmp).parts[0] for src, _ in seen
                if Path(src).is_relative_to(grading_tmp)}
    assert len(gradings) == 1, seen  # one grading folder, holding every run's binds
    toolchain = local_rootfs(fixture.spec.image or DEFAULT_IMAGE).root  # bwrap's root tree
    outside = [(src, dst) for src, dst in seen if not Path(src).is_relative_to(grading_tmp)
               and not Path(src).is_relative_to(toolchain)]
    assert outside == [], outside
    helpers = {dst: Path(src).relative_to(grading_tmp).as_posix() for src, dst in seen
               if dst in (split.JUDGE_MOUNT, split.SUBJECT_MOUNT)}
    folder = gradings.pop()
    assert helpers == {split.JUDGE_MOUNT: f"{folder}/{split.HELPERS_DIR}",
                       split.SUBJECT_MOUNT: f"{folder}/{split.HELPERS_DIR}"}, seen
    assert not any(Path(src).is_relative_to(split.JUDGE_PACKAGE) for src, _ in seen)


def test_the_copy_is_the_packages_source_files(tmp_path, monkeypatch):
    """No bytecode cache nor anything else; a linked file (some installers link) as its
    content; readable by the sandbox users, writable by the grader alone."""
    installed = package_copy(tmp_path / "installed")
    (installed / "codec.py").unlink()
    (installed / "codec.py").symlink_to(split.JUDGE_PACKAGE / "codec.py")
    monkeypatch.setattr(split, "JUDGE_PACKAGE", installed)
    (tmp_path / "grading").mkdir()
    copy = split.copy_helpers(tmp_path / "grading")
    assert not (copy / "codec.py").is_symlink()
    assert (copy / "codec.py").read_bytes() == (installed / "codec.py").read_bytes()
    names = sorted(p.name for p in copy.iterdir())
    assert names == sorted(p.name for p in split.JUDGE_PACKAGE.iterdir()
                           if p.suffix in (".py", ".js")), names
    assert "boot.py" in names and "subject_server.js" in names
    assert {oct(p.stat().st_mode & 0o777) for p in copy.iterdir()} == {oct(0o644)}
    assert oct(copy.stat().st_mode & 0o777) == oct(0o755)


def test_grader_files_digest_covers_the_bound_copy(fixture, tmp_path, monkeypatch):
    """The digest is of the copy's files (a cache in the installed package is not bound, and
    not digested); the judge and subject cannot change it (read-only binds)."""
    monkeypatch.setattr(split, "JUDGE_PACKAGE", package_copy(tmp_path / "installed"))
    (tmp_path / "expected").mkdir()
    copy = split.copy_helpers(tmp_path / "expected")
    graded = grade_workspace(fixture, fixture.solution_dir("correct"), sandbox="bwrap")
    assert graded.outcome == Outcome.correct, graded
    assert graded.digests["grader_files_before"] == files_digest(listed(copy), copy)
    assert graded.digests["grader_files_after"] == graded.digests["grader_files_before"]
    assert files_digest(listed(split.JUDGE_PACKAGE), split.JUDGE_PACKAGE) != \
        graded.digests["grader_files_before"]


#: run in a private mount namespace: the installed package is a tmpfs only this process has
#: mounted, so the engine, like the host's engine of a grader in a container, sees it empty
PRIVATE_PACKAGE = """
import json, shutil, sys, tempfile
from pathlib import Path
from evalq.fixtures.fixture import load_fixture
from evalq.graders import split
from evalq.graders.grade import grade_workspace
from evalq.graders.sandbox.scratch import mount_tmpfs

package, root, tmp = map(Path, sys.argv[1:4])
why = mount_tmpfs(package, "evalq-test-private", "size=8m,mode=0755")
assert why is None, f"cannot mount the private package folder: {why}"
shutil.copytree(split.JUDGE_PACKAGE, package, dirs_exist_ok=True)
split.JUDGE_PACKAGE = package
tempfile.tempdir = str(tmp)
fixture = load_fixture(root)
print(json.dumps({name: grade_workspace(fixture, fixture.solution_dir(name), sandbox="docker")
                  .model_dump(mode="json") for name in ("correct", "incorrect")}))
"""


def test_docker_grading_when_the_engine_cannot_see_the_installed_package(fixture, tmp_path,
                                                                         grading_tmp):
    from evalq.graders.sandbox import get_sandbox

    ok, why = get_sandbox("docker").available()
    if not ok:
        pytest.fail(f"sandbox 'docker' is not available: {why}", pytrace=False)
    package = tmp_path / "private-package"
    package.mkdir()
    run = subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable,
                          "-c", PRIVATE_PACKAGE, str(package), str(fixture.path),
                          str(grading_tmp)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert list(package.iterdir()) == []  # what the engine sees of the "installed" package
    graded = json.loads(run.stdout.strip().splitlines()[-1])
    for name, want in REFERENCES.items():
        assert graded[name]["outcome"] == want.value, graded[name]
        assert graded[name]["tampered"] is False, graded[name]


@pytest.mark.parametrize("exit_code, signal, criteria, crashed", [
    (0, None, [Criterion(index=0, name="a", passed=True)], False),
    (1, None, [Criterion(index=0, name="a", passed=False)], False),
    (2, None, [Criterion(index=0, name="a", passed=False)], False),  # a file failed to load
    (2, None, [Criterion(index=0, name="a", passed=True)], True),
    (4, None, None, True),                                           # usage error, no report
    (-9, 9, [Criterion(index=0, name="a", passed=None)], True),
])
def test_which_judge_exits_the_report_explains(exit_code, signal, criteria, crashed):
    ended = ExecResult(exit_code=exit_code, stdout="", stderr="boom\n", duration_seconds=1.0,
                       signal=signal)
    why = unexplained_exit(ended, criteria)
    assert (why is not None) == crashed, why
    assert why is None or why.endswith("its stderr ends: boom"), why


def test_a_report_without_the_start_mark_is_no_verdict(tmp_path):
    """The mark is what says the boot ran; a report without it is not taken as the judge's."""
    (tmp_path / "junit.xml").write_text("<testsuites/>")
    ended = ExecResult(exit_code=2, stdout="", stderr="", duration_seconds=0.1)
    assert missing_verdict(ended, tmp_path, "junit.xml").startswith("the judge never started")
    (tmp_path / split.STARTED_MARK).write_text("1\n")
    assert missing_verdict(ended, tmp_path, "junit.xml") is None
