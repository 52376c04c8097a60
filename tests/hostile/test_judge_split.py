"""Forgery against the verdict itself, judged apart (verdict = "judge") and in-process (issue 14).

Each attack is the agent's wrong `app.py` (answer() is 41, the hidden check wants 42), with
files planted beside it. Judged apart, every attack ends `incorrect`; in-process, the control
shows the attack really reached the real check (it is reported as passed), and the canaries
catch every forgery of the report as `tampered`.
"""

from __future__ import annotations

import textwrap
import uuid
from pathlib import Path

import pytest
from hostile_backend import backend, traversable_tempdir  # noqa: F401 (the fixture)

from evalq.fixtures.fixture import Fixture, freeze_fixture, load_fixture
from evalq.graders import split
from evalq.graders.grade import grade_workspace
from evalq.graders.sandbox import get_sandbox
from evalq.models import Outcome

JUDGED = """from evalq_judge import load_subject


def test_answer():
    assert load_subject("app").answer() == 42


def test_answer_is_an_int():
    assert isinstance(load_subject("app").answer(), int)
"""
IN_PROCESS = """import app


def test_answer():
    assert app.answer() == 42


def test_answer_is_an_int():
    assert isinstance(app.answer(), int)
"""
PYTEST = '["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml={report_dir}/junit.xml", "hidden_tests"]'


NODE_JUDGED = """from evalq_judge import load_subject

lib = load_subject("./lib.js")


def test_answer():
    assert lib.answer() == 42


def test_answer_is_a_number():
    assert isinstance(lib.answer(), int)
"""
NODE_IN_PROCESS = """'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const lib = require('../lib.js');

test('answer is 42', () => { assert.equal(lib.answer(), 42); });
test('answer is a number', () => { assert.equal(typeof lib.answer(), 'number'); });
"""
#: the agent's lib.js turns every function of node's assert modules into a no-op
NOOP_ASSERT = """'use strict';
for (const name of ['node:assert', 'node:assert/strict']) {
  const mod = require(name);
  for (const key of Object.keys(mod)) if (typeof mod[key] === 'function') mod[key] = () => {};
}
module.exports = { answer: () => 41 };
"""
#: the same, but only for the module the real tests use: a canary that asserts through
#: another module would still fail, as canaries must
NOOP_STRICT_ASSERT = NOOP_ASSERT.replace("['node:assert', 'node:assert/strict']",
                                         "['node:assert/strict']")


def make_node_fixture(root: Path, verdict: str) -> Fixture:
    """The same task in Node: lib.answer() must be 42."""
    (root / "workspace").mkdir(parents=True)
    (root / "workspace" / "lib.js").write_text("module.exports = { answer: () => 0 };\n")
    (root / "hidden" / "hidden_tests").mkdir(parents=True)
    test = ("test_answer.py", NODE_JUDGED) if verdict == "judge" else ("answer.test.js",
                                                                     NODE_IN_PROCESS)
    (root / "hidden" / "hidden_tests" / test[0]).write_text(test[1])
    for name, value in (("correct", 42), ("incorrect", 41)):
        (root / "solutions" / name).mkdir(parents=True)
        (root / "solutions" / name / "lib.js").write_text(
            f"module.exports = {{ answer: () => {value} }};\n")
    grade = ('command = ["pytest", "hidden_tests"]\nverdict = "judge"' if verdict == "judge"
             else 'command = ["node", "--test", "--test-reporter=tap", "hidden_tests/"]\n'
                  'report = "tap"')
    (root / "fixture.toml").write_text(textwrap.dedent(f'''
        id = "forgery-node"
        title = "forgery-node"
        prompt = "n/a"
        toolchain = "node"
        image = "evalq-grader-node:local"
        [grade]
        {grade}
        timeout_seconds = 20
        memory_mb = 256
        pids = 64
    ''').replace("\n        ", "\n"))
    freeze_fixture(root)
    from evalq.fixtures.fixture import load_fixture

    return load_fixture(root)


QUICK = JUDGED.replace("from evalq_judge import load_subject\n",
                       "from evalq_judge import call_timeout, load_subject\n\n"
                       "call_timeout(2)\n")


def make_fixture(root: Path, verdict: str, tests: str | None = None) -> Fixture:
    (root / "workspace").mkdir(parents=True)
    (root / "workspace" / "app.py").write_text("def answer():\n    return 0\n")
    (root / "hidden" / "hidden_tests").mkdir(parents=True)
    (root / "hidden" / "hidden_tests" / "test_answer.py").write_text(
        tests or (JUDGED if verdict == "judge" else IN_PROCESS))
    for name, value in (("correct", 42), ("incorrect", 41)):
        (root / "solutions" / name).mkdir(parents=True)
        (root / "solutions" / name / "app.py").write_text(f"def answer():\n    return {value}\n")
    command = '["pytest", "hidden_tests"]\nverdict = "judge"' if verdict == "judge" else PYTEST
    (root / "fixture.toml").write_text(textwrap.dedent(f'''
        id = "forgery"
        title = "forgery"
        prompt = "n/a"
        [grade]
        command = {command}
        timeout_seconds = 20
        memory_mb = 256
        pids = 64
    '''))
    freeze_fixture(root)
    from evalq.fixtures.fixture import load_fixture

    return load_fixture(root)


FORGED_XML = ('<testsuites><testsuite name="pytest" tests="3"><testcase classname='
              '"hidden_tests.test_answer" name="test_answer"/><testcase classname='
              '"hidden_tests.test_answer" name="test_answer_is_an_int"/><testcase classname='
              '"hidden_tests.test_answer" name="test_bonus"/></testsuite></testsuites>')
WRITE_REPORT = f"""
import os
def forge():
    os.makedirs("/report", exist_ok=True)
    with open("/report/junit.xml", "w") as out:
        out.write({FORGED_XML!r})
"""
PATCH_REPORTS = """
import gc, pytest
from _pytest.config import Config

class Forge:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        report.outcome, report.longrepr = "passed", None

for obj in gc.get_objects():
    if isinstance(obj, Config):
        obj.pluginmanager.register(Forge(), "forge")
"""
LIVE_SESSION_PLUGIN = """
import gc, pytest
from _pytest.main import Session

class Forge:
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        hook = item.ihook
        hook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        from _pytest.reports import TestReport
        for when in ("setup", "call", "teardown"):
            hook.pytest_runtest_logreport(report=TestReport(item.nodeid, item.location, {},
                                          "passed", None, when))
        hook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        return True

for obj in gc.get_objects():
    if isinstance(obj, Session):
        obj.config.pluginmanager.register(Forge(), "forge-session")
"""
WRONG = "\ndef answer():\n    return 41\n"
READ_HIDDEN = """
import glob, re

def answer():
    for path in (glob.glob("**/test_*.py", recursive=True)
                 + glob.glob("/*/hidden*/**/test_*.py", recursive=True)):
        found = re.findall(r"answer\\(\\) == (\\d+)", open(path).read())
        if found:
            return int(found[0])
    return 41
"""
SHADOW = WRITE_REPORT + "\nforge()\nraise SystemExit(0)\n"
#: a plugin, registered from the agent's code, that leaves the canaries failing as they must
SPARING_PLUGIN = """
import gc, pytest
from _pytest.config import Config

class Spare:
%s

for obj in gc.get_objects():
    if isinstance(obj, Config):
        obj.pluginmanager.register(Spare(), "spare")
"""
XFAIL_WHAT_FAILS = SPARING_PLUGIN % """
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        if report.failed:
            report.outcome, report.wasxfail = "skipped", "known bug"
"""
DESELECT_BY_NAME = SPARING_PLUGIN % """
    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session, config, items):
        items[:] = [i for i in items if i.name != "test_answer"]"""

#: attack id -> files planted in the workspace (app.py is always the wrong one unless given)
ATTACKS = {
    "patch pytest reports": {"app.py": PATCH_REPORTS + WRONG},
    "plugin on the live session": {"app.py": LIVE_SESSION_PLUGIN + WRONG},
    "atexit rewrites the report": {"app.py": WRITE_REPORT + "import atexit\natexit.register(forge)\n" + WRONG},
    "writes the report, exits 0": {"app.py": WRITE_REPORT + "forge()\nos._exit(0)\n" + WRONG},
    "pytest.py shadows the runner": {"pytest.py": SHADOW},
    "_pytest/ shadows the runner": {"_pytest/__init__.py": SHADOW},
    "sitecustomize.py": {"sitecustomize.py": SHADOW},
    "usercustomize.py": {"usercustomize.py": SHADOW},
    "site.py": {"site.py": SHADOW},
    "encodings/ shadows the stdlib": {"encodings/__init__.py": SHADOW},
    ".pth file": {"evil.pth": "import os; os.system('true')\n", "sitecustomize.py": SHADOW},
    "reads the hidden tests": {"app.py": READ_HIDDEN},
    "marks what fails xfail": {"app.py": XFAIL_WHAT_FAILS + WRONG},
    "deselects the failing check": {"app.py": DESELECT_BY_NAME + WRONG},
    "os._exit(0) at import": {"app.py": "import os\nos._exit(0)\n"},
    "os._exit(1) at import": {"app.py": "import os\nos._exit(1)\n"},
    "kills its own process": {"app.py": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"},
    "report overwritten with garbage": {"app.py": "import atexit\natexit.register(lambda: open("
                                        "'/report/junit.xml', 'w').write('<<garbage'))\n" + WRONG},
}
#: in-process, these forge the verdict while every canary still fails (issue: they graded
#: `correct`): what gives them away is a skipped or a missing real check
SPARE_THE_CANARIES = ["marks what fails xfail", "deselects the failing check"]
#: in-process, these stop the runner itself: `incorrect` (they graded grading_failure, which is
#: counted apart, or disagreed between the backends)
STOP_THE_RUNNER = ["os._exit(0) at import", "os._exit(1) at import", "kills its own process",
                   "report overwritten with garbage"]
#: attacks that really work in-process (the control); the rest never get that far there either
WORK_IN_PROCESS = ["patch pytest reports", "plugin on the live session",
                   "atexit rewrites the report", "writes the report, exits 0",
                   "pytest.py shadows the runner", "_pytest/ shadows the runner",
                   "reads the hidden tests"]
FORGERIES = set(WORK_IN_PROCESS) - {"reads the hidden tests"}


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    root = tmp_path_factory.mktemp("forgery")
    made = {v: make_fixture(root / v, v) for v in ("judge", "in-process")}
    made["judge quick"] = make_fixture(root / "quick", "judge", QUICK)
    made.update({f"node {v}": make_node_fixture(root / f"node-{v}", v)
                 for v in ("judge", "in-process")})
    return made


@pytest.fixture(autouse=True)
def grading_tmp(monkeypatch):
    with traversable_tempdir("evalq-forgery-", monkeypatch) as folder:
        yield folder


def grade(fixture, backend, tmp_path, files):
    workspace = tmp_path / "agent-workspace"
    for rel, text in {"app.py": WRONG, **files}.items():
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (workspace / rel).write_text(text)
    return grade_workspace(fixture, workspace, sandbox=backend)


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_judged_apart_every_attack_is_incorrect(fixtures, backend, tmp_path, attack):
    graded = grade(fixtures["judge"], backend, tmp_path, ATTACKS[attack])
    assert graded.outcome == Outcome.incorrect, graded
    assert graded.verdict == "judge" and graded.tampered is False, graded
    assert "test_answer" in graded.reason, graded.reason
    assert graded.digests["hidden_tests_before"] == graded.digests["hidden_tests_after"]


@pytest.mark.parametrize("attack", WORK_IN_PROCESS)
def test_control_the_attack_works_in_process(fixtures, backend, tmp_path, attack):
    graded = grade(fixtures["in-process"], backend, tmp_path, ATTACKS[attack])
    assert graded.verdict == "in-process"
    if attack in FORGERIES:
        # the real check was forged as passed; only the canaries tell, so: tampered, never correct
        assert graded.outcome == Outcome.incorrect and graded.tampered is True, graded
        assert graded.reason.startswith("tampered: ") and "canary" in graded.reason, graded.reason
    else:
        assert graded.outcome == Outcome.correct, graded
    real = {c.name.rsplit("::", 1)[-1]: c.passed for c in graded.criteria}
    assert real.get("test_answer", True) is True, graded.criteria


@pytest.mark.parametrize("attack", SPARE_THE_CANARIES)
def test_in_process_forgery_that_spares_the_canaries_is_tampered(fixtures, backend, tmp_path,
                                                                 attack):
    graded = grade(fixtures["in-process"], backend, tmp_path, ATTACKS[attack])
    assert graded.outcome == Outcome.incorrect and graded.tampered is True, graded
    real = {c.name.rsplit("::", 1)[-1]: c.passed for c in graded.criteria}
    assert real.get("test_answer") is not False, real  # the control: the real check was forged


@pytest.mark.parametrize("attack", STOP_THE_RUNNER)
def test_in_process_runner_stopped_by_the_agents_code_is_incorrect(fixtures, backend, tmp_path,
                                                                    attack):
    graded = grade(fixtures["in-process"], backend, tmp_path, ATTACKS[attack])
    assert graded.outcome == Outcome.incorrect and graded.tampered is not True, graded


@pytest.mark.parametrize("verdict", ["judge", "in-process"])
def test_references_and_canaries_stay_apart(fixtures, backend, tmp_path, verdict):
    """The correct reference is correct: canaries fail as they must and are not its criteria."""
    fixture = fixtures[verdict]
    graded = grade_workspace(fixture, fixture.solution_dir("correct"), sandbox=backend)
    assert graded.outcome == Outcome.correct and graded.tampered is False, graded
    assert sorted(c.name.rsplit("::", 1)[-1] for c in graded.criteria) == [
        "test_answer", "test_answer_is_an_int"]


@pytest.mark.parametrize("verdict", ["judge", "in-process"])
@pytest.mark.parametrize("source", [NOOP_ASSERT, NOOP_STRICT_ASSERT],
                         ids=["node:assert", "node:assert/strict only"])
def test_node_solution_that_disarms_assert(fixtures, backend, tmp_path, verdict, source):
    """Judged apart, `assert` lives in the judge and the attack is void; in-process (the
    control) it silences the real checks and the canary alike: tampered. The canaries are
    copies of real tests, so they assert through the same module and are disarmed with them
    (disarming only node:assert/strict graded `correct` while a canary used node:assert)."""
    workspace = tmp_path / "agent-workspace"
    workspace.mkdir()
    (workspace / "lib.js").write_text(source)
    graded = grade_workspace(fixtures[f"node {verdict}"], workspace, sandbox=backend)
    assert graded.outcome == Outcome.incorrect, graded
    if verdict == "judge":
        assert graded.tampered is False and "test_answer" in graded.reason, graded
    else:
        assert graded.tampered is True and "canary" in graded.reason, graded
        assert [c.passed for c in graded.criteria] == [True, True], graded.criteria


@pytest.mark.parametrize("verdict", ["judge", "in-process"])
def test_node_references(fixtures, backend, verdict):
    fixture = fixtures[f"node {verdict}"]
    for name, want in (("correct", Outcome.correct), ("incorrect", Outcome.incorrect)):
        graded = grade_workspace(fixture, fixture.solution_dir(name), sandbox=backend)
        assert graded.outcome == want and graded.tampered is False, graded


@pytest.mark.parametrize("body, says", [
    ("import time\n\ndef answer():\n    time.sleep(3600)\n", "did not answer within 2s"),
    ("import os\n\ndef answer():\n    os._exit(3)\n", "subject process ended"),
], ids=["hangs", "dies"])
def test_subject_that_hangs_or_dies_fails_its_check(fixtures, backend, tmp_path, body, says):
    graded = grade(fixtures["judge quick"], backend, tmp_path, {"app.py": body})
    assert graded.outcome == Outcome.incorrect and graded.tampered is False, graded
    failed = [c for c in graded.criteria if c.passed is False]
    assert len(failed) == 2 and says in failed[0].evidence, failed


def test_subject_that_cannot_start_is_a_grading_failure(fixtures, backend, tmp_path,
                                                        monkeypatch):
    """The subject server is evalq's own: when it ends before its first line, the grader is
    at fault (a grading_failure), not the agent. Its start command is replaced by `true`."""
    monkeypatch.setattr(split, "PYTHON_SUBJECT", ["true"])
    graded = grade(fixtures["judge"], backend, tmp_path, {"app.py": "def answer():\n    return 42\n"})
    assert graded.outcome == Outcome.grading_failure, graded
    assert graded.reason.startswith("judge-subject channel broke: "), graded.reason


def test_tampered_reaches_the_attempt_row_and_the_report(fixtures, tmp_path):
    """A real tampered grade, through the result message's fields into the results database
    (the store's own upsert) and out as the report's list of tampered attempts."""
    import sys

    from evalq.graders.service import result_fields
    from evalq.report.compute import compute_report
    from evalq.report.markdown import render_markdown
    from evalq.results.store import record_attempt

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "report"))
    from report_native_rows import make_study

    graded = grade(fixtures["in-process"], get_sandbox("bwrap"), tmp_path,
                   ATTACKS["patch pytest reports"])
    outcome, reason, criteria, record = result_fields(graded, "host-a")
    engine = make_study(f"sqlite:///{tmp_path / 'r.db'}", "tamper", tasks=("t1",), k=1)
    trial = "tamper-t1-cand-1"
    assert record_attempt(engine, {"trial_id": trial, "attempt": 1, "study_id": "tamper",
                                   "outcome": outcome, "reason": reason, "criteria": criteria,
                                   "grade": record}, regrade=True)
    report = compute_report(engine, "tamper", n_resamples=200)
    block = report["grading_integrity"]
    assert block["tampered_count"] == 1 and block["tampered"][0]["trial_id"] == trial
    assert block["tampered"][0]["reason"].startswith("tampered: ")
    assert block["verdicts"] == {"in-process": 1, "unrecorded": 1} and block["note"]
    row = next(r for r in report["trial_rows"] if r["trial_id"] == trial)
    assert (row["outcome"], row["tampered"], row["verdict"]) == ("incorrect", True, "in-process")
    assert "Tampered attempts (graded incorrect): 1." in render_markdown(report)


def test_in_process_runner_files_rewritten_during_the_run_are_tampering(fixtures, backend,
                                                                        tmp_path):
    """The runner's own files (reset before the run) and the hidden tests, rewritten by the
    agent's code while the tests run: the digests differ, so the grade is tampered."""
    attack = ("import pathlib\nfor p in pathlib.Path('hidden_tests').glob('test_*.py'):\n"
              "    p.write_text(p.read_text() + '\\n# edited\\n')\n"
              "pathlib.Path('conftest.py').write_text('# mine now\\n')\n" + WRONG)
    graded = grade(fixtures["in-process"], backend, tmp_path, {"app.py": attack})
    assert graded.outcome == Outcome.incorrect and graded.tampered is True, graded
    assert "hidden tests changed during the run" in graded.reason, graded.reason
    assert graded.digests["grader_files_before"] != graded.digests["grader_files_after"]


def test_in_process_deep_tree_left_at_grading_time_ends_as_an_outcome(fixtures, tmp_path):
    """The grader lists the workspace after the run for its digests: a tree deeper than
    Python's recursion limit must not turn that into a traceback."""
    attack = ("import os\nos.makedirs('/'.join(['d'] * 1200), exist_ok=True)\n" + WRONG)
    graded = grade(fixtures["in-process"], get_sandbox("bwrap"), tmp_path, {"app.py": attack})
    assert graded.outcome == Outcome.incorrect and graded.tampered is False, graded


@pytest.mark.parametrize("verdict", ["judge", "in-process"])
def test_a_test_file_that_fails_to_load_is_incorrect_not_tampered(fixtures, tmp_path, verdict):
    """Its canaries never ran, and that is explained by the file's own failed entry."""
    judged = load_fixture(Path(__file__).resolve().parents[2] / "fixtures" / "py-slugify-bugfix")
    fixture = judged if verdict == "judge" else fixtures["in-process"]
    workspace = tmp_path / "agent-workspace"
    workspace.mkdir()
    (workspace / "README.md").write_text("the code is gone\n")
    graded = grade_workspace(fixture, workspace, sandbox=get_sandbox("bwrap"))
    assert graded.outcome == Outcome.incorrect and graded.tampered is False, graded
    assert [c.passed for c in graded.criteria] == [False], graded.criteria


HOST_REPORT = ('<testsuites><testsuite name="pytest"><testcase classname="hidden_tests.test_answer"'
               ' name="test_read_from_the_host"/></testsuite></testsuites>')


def test_in_process_report_swapped_for_a_link_is_not_followed(fixtures, backend, tmp_path):
    """The grader reads the report as root on the host: a link the agent's code leaves in its
    place (here to a host file holding a JUnit report) must not be followed (nor a FIFO
    waited on); it was read, and its check named in the grade."""
    host = tmp_path / "host-report.xml"
    host.write_text(HOST_REPORT)
    attack = ("import atexit, os\n\ndef swap():\n    os.remove('/report/junit.xml')\n"
              f"    os.symlink({str(host)!r}, '/report/junit.xml')\n\natexit.register(swap)\n"
              + WRONG)
    graded = grade(fixtures["in-process"], backend, tmp_path, {"app.py": attack})
    assert graded.outcome == Outcome.incorrect, graded
    assert "test_read_from_the_host" not in graded.reason, graded.reason
    assert "not a regular file" in graded.reason, graded.reason


def test_in_process_hidden_tests_swapped_for_a_link_are_not_followed(fixtures, backend,
                                                                     tmp_path):
    """Nor is a link put where the hidden tests were (to a host tree: the grader would read
    every file under it for its digest, or wait forever on one like /proc/kmsg)."""
    from evalq.graders.tamper import files_digest, listed

    host = tmp_path / "host-tree" / "hidden_tests"
    host.mkdir(parents=True)
    (host / "test_answer.py").write_text("host file\n")
    attack = ("import atexit, os, shutil\n\ndef swap():\n    shutil.rmtree('hidden_tests')\n"
              f"    os.symlink({str(host)!r}, 'hidden_tests')\n\natexit.register(swap)\n" + WRONG)
    graded = grade(fixtures["in-process"], backend, tmp_path, {"app.py": attack})
    assert graded.outcome == Outcome.incorrect and graded.tampered is True, graded
    assert "hidden tests changed during the run" in graded.reason, graded.reason
    followed = files_digest(listed(host), host.parent)  # what digesting through the link gives
    assert graded.digests["hidden_tests_after"] != followed


SPOOF = "\x1b[1A\x1b[2K\rforgery: correct"


def test_terminal_codes_from_the_agent_reach_no_grade_text(fixtures, backend, tmp_path):
    """What the agent names or prints is shown by `evalq fixtures grade` and in reports: raw,
    an escape code or a carriage return could overwrite the verdict line on a terminal."""
    import os

    attack = ("import sys\nsys.stderr.write(" + repr(SPOOF) + ")\nsys.stderr.flush()\n"
              "def answer():\n    raise ValueError(" + repr(SPOOF) + ")\n")
    workspace = tmp_path / "agent-workspace"
    workspace.mkdir()
    (workspace / "app.py").write_text(attack)
    os.symlink("/etc/hostname", workspace / SPOOF.replace("/", "_"))
    graded = grade_workspace(fixtures["judge"], workspace, sandbox=backend)
    assert graded.outcome == Outcome.incorrect, graded
    assert "symlink to /etc/hostname" in graded.reason, graded.reason  # the name is there...
    assert "forgery: correct" in graded.output_tail, graded.output_tail
    texts = [graded.reason, graded.output_tail, *(c.evidence for c in graded.criteria)]
    assert not any(ch in t for t in texts for ch in "\x1b\r"), texts  # ...but not as codes


HIDDEN_MARKER = "evalq-hidden-" + uuid.uuid4().hex
SEARCH_EVERYWHERE = """
import itertools, os

SKIP = {"/proc", "/sys", "/dev", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc"}


def answer():
    for top, dirs, files in itertools.chain(os.walk("/"), os.walk("/dev/shm")):
        dirs[:] = [d for d in dirs if os.path.join(top, d) not in SKIP]
        for name in files:
            path = os.path.join(top, name)
            try:
                if os.path.isfile(path) and not os.path.islink(path) and \
                        os.path.getsize(path) < 1 << 20 and MARK in open(path, "rb").read():
                    return 42
            except OSError:
                pass
    for pid in filter(str.isdigit, os.listdir("/proc")):
        for part in ("cmdline", "environ"):
            try:
                if MARK in open(f"/proc/{pid}/{part}", "rb").read():
                    return 42
            except OSError:
                pass
    return 41
"""


@pytest.mark.parametrize("verdict", ["judge", "in-process"])
def test_hidden_tests_are_nowhere_in_the_subjects_reach(fixtures, backend, tmp_path, verdict):
    """Not just at their usual paths: judged apart, nothing the subject can read (outside the
    toolchain, which is the image's) holds a string only the hidden tests contain. In-process
    (the control, and the weaker mode's known limit) the same search finds it."""
    tests = (JUDGED if verdict == "judge" else IN_PROCESS) + f"\n\nMARK = {HIDDEN_MARKER!r}\n"
    fixture = make_fixture(tmp_path / "marked", verdict, tests)
    # spelled backwards in the agent's file, so that the file itself does not hold it
    attack = f"MARK = {HIDDEN_MARKER[::-1]!r}[::-1].encode()\n" + SEARCH_EVERYWHERE
    graded = grade(fixture, backend, tmp_path, {"app.py": attack})
    if verdict == "judge":
        assert graded.outcome == Outcome.incorrect and graded.tampered is False, graded
        assert "test_answer" in graded.reason, graded.reason
    else:
        assert graded.outcome == Outcome.correct, graded


def test_verdict_is_void_when_the_backend_is_gone_after_the_run(fixtures, tmp_path):
    """An engine that stops stops its containers (SIGTERM): judged apart the judge then fails
    its remaining checks on a 'dead' subject, and in-process a runner killed by a signal is
    `incorrect` (graded code can do that). So a backend that is gone once the run is over
    voids the verdict: grading_failure. The run is real (bwrap); only the backend's answer to
    "are you there?" afterwards says no, as Docker's ping does once its engine is stopped."""
    from evalq.graders.sandbox.bwrap import BwrapSandbox

    class GoneAfterwards(BwrapSandbox):
        runs, finished = 1, 0  # how many runs a grading makes; how many have ended

        def run(self, *args, **kwargs):
            try:
                return super().run(*args, **kwargs)
            finally:
                type(self).finished += 1

        @classmethod
        def available(cls):
            return (False, "engine stopped") if cls.finished >= cls.runs else (True, "")

    for verdict, runs in (("judge", 2), ("in-process", 1)):
        GoneAfterwards.runs, GoneAfterwards.finished = runs, 0
        graded = grade(fixtures[verdict], GoneAfterwards(), tmp_path / verdict,
                       ATTACKS["kills its own process"])
        assert graded.outcome == Outcome.grading_failure, graded
        assert "sandbox went away during the run" in graded.reason, graded.reason


FAKE_TAP = """'use strict';
// the runner's own stdout (the sandbox's), past the child's pipe that node --test parses
const fs = require('node:fs');
for (const line of ['ok 1 - answer is 42', 'ok 2 - answer is a number', '1..2']) {
  try { fs.writeSync(fs.openSync(`/proc/${process.ppid}/fd/1`, 'w'), line + '\\n'); } catch (e) {}
  process.stdout.write(line + '\\n');
}
module.exports = { answer: () => 41 };
"""


def test_node_in_process_fake_tap_lines_do_not_pass(fixtures, backend, tmp_path):
    """TAP is read from the runner's stdout, which graded code can write to: its lines sit
    beside the real ones, and the real failing check still fails (held, no fix)."""
    workspace = tmp_path / "agent-workspace"
    workspace.mkdir()
    (workspace / "lib.js").write_text(FAKE_TAP)
    graded = grade_workspace(fixtures["node in-process"], workspace, sandbox=backend)
    assert graded.outcome == Outcome.incorrect, graded
    assert any(c.name == "answer is 42" and c.passed is False for c in graded.criteria), \
        graded.criteria
