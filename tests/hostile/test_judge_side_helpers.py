"""The subject runs the code under test and nothing else: setup files, reading them back and
static checks of the source are the judge's, out of reach of what the agent's code replaces.

Each attack is agent code that, at import, replaces part of the subject's runtime (builtins
.open, tempfile, os, inspect) or rewrites its own files, to (a) rewrite the setup file a check
hands to the code under test, or (b) show a leftover-copy check source other than its own.
When the judge used the subject for these (evalq_judge's old tmp_dir/write_text through the
subject's `open`, `inspect.getsource` there), three shipped fixtures graded these `correct`:
py-notes-tags with its own incorrect reference, py-durations-refactor with no refactor done,
c-pathnorm-feature with its incorrect reference and a Makefile that swapped the hidden driver
(written to the subject's /tmp, built after the agent's Makefile ran).
Now each is `incorrect`, failing exactly the checks the attack aimed at. And the judge does
not even ask: a hidden test that loads the language's own modules in the subject fails.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hostile_backend import backend, traversable_tempdir  # noqa: F401 (the fixture)

from evalq.fixtures.suite import DEFAULT_SUITE_DIR, load_suite
from evalq.graders.grade import grade_workspace, prepare_reference
from evalq.models import Outcome
from test_judge_split import make_fixture, make_node_fixture

#: the notes fixture's checks that an old notes file (no "tags") exposes
OLD_FILE_CHECKS = {"test_existing_notes_file_without_tags_still_loads",
                   "test_cli_lists_old_notes_file"}
LEFTOVER_CHECK = "test_no_private_copy_of_the_parser_left"

#: (a) the subject's `open`, for writing JSON, adds "tags" to every note on close
OPEN_REWRITES_SETUP = '''
import builtins as _b, json as _j
_real_open = _b.open


class _AddsTags:
    def __init__(self, handle):
        self._h, self._parts = handle, []

    def write(self, text):
        self._parts.append(text)
        return len(text)

    def close(self):
        text = "".join(self._parts)
        try:
            data = _j.loads(text)
            for note in data.get("notes", []):
                note.setdefault("tags", [])
            text = _j.dumps(data)
        except ValueError:
            pass
        self._h.write(text)
        self._h.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __getattr__(self, name):
        return getattr(self._h, name)


def _open(file, mode="r", *args, **kwargs):
    handle = _real_open(file, mode, *args, **kwargs)
    return _AddsTags(handle) if "w" in mode and str(file).endswith(".json") else handle


_b.open = _open
'''
#: (a) a folder made for a check is watched by a thread that adds "tags" to every note of the
#: JSON files in it, as they are written (the store waits a moment before reading from such a
#: folder, which only settles a race the thread wins anyway)
RELAY = '''
import json as _j, os as _o, threading as _th, time as _time

_watched = set()


def _add_tags(folder):
    for name in _o.listdir(folder):
        path = _o.path.join(folder, name)
        if not name.endswith(".json"):
            continue
        try:
            with open(path) as given:
                data = _j.load(given)
            if all("tags" in note for note in data.get("notes", [])):
                continue
            for note in data.get("notes", []):
                note.setdefault("tags", [])
            with open(path + ".w", "w") as out:
                _j.dump(data, out)
            _o.replace(path + ".w", path)
        except (OSError, ValueError):
            pass


def _watch(folder):
    while True:
        _add_tags(folder)
        _time.sleep(0.002)


def _relay(folder):
    _watched.add(str(folder))
    _th.Thread(target=_watch, args=(str(folder),), daemon=True).start()


from . import store as _store  # noqa: E402
_init = _store.NoteStore.__init__


def _waits(self, path, *args, **kwargs):
    if _o.path.dirname(str(path)) in _watched:
        _time.sleep(0.05)
    _init(self, path, *args, **kwargs)


_store.NoteStore.__init__ = _waits
'''
TEMPFILE_RELAYS = RELAY + '''
import tempfile as _t
_mkdtemp = _t.mkdtemp


def _mkdtemp_relaying(*args, **kwargs):
    folder = _mkdtemp(*args, **kwargs)
    _relay(folder)
    return folder


_t.mkdtemp = _mkdtemp_relaying
'''
OS_MKDIR_RELAYS = RELAY + '''
_mkdir = _o.mkdir


def _mkdir_relaying(path, *args, **kwargs):
    _mkdir(path, *args, **kwargs)
    if str(path).startswith("/tmp/"):
        _relay(str(path))


_o.mkdir = _mkdir_relaying
'''
#: (b) what every faked source shows for the three modules that keep their own parser
CLEAN = "from .durations import parse_duration\\n"
INSPECT_FAKES_SOURCE = f'''
import inspect as _inspect
_getsource = _inspect.getsource


def _fake(obj):
    name = getattr(obj, "__name__", "")
    if name in ("jobrunner.config", "jobrunner.schedule", "jobrunner.retention"):
        return "{CLEAN}"
    return _getsource(obj)


_inspect.getsource = _fake
'''
OPEN_FAKES_SOURCE = f'''
import builtins as _b, io as _io
_real_open = _b.open


def _open(file, mode="r", *args, **kwargs):
    if str(file).endswith(("jobrunner/config.py", "jobrunner/schedule.py",
                           "jobrunner/retention.py")) and "w" not in mode:
        return _io.BytesIO(b"{CLEAN}") if "b" in mode else _io.StringIO("{CLEAN}")
    return _real_open(file, mode, *args, **kwargs)


_b.open = _open
'''
#: (b) the modules are loaded, then their files on disk replaced by clean ones
OS_REWRITES_SOURCE = f'''
import os as _o
from . import config, retention, schedule  # noqa: E402,F401 (loaded with their parsers)

for _name in ("config", "schedule", "retention"):
    _path = _o.path.join(_o.path.dirname(__file__), _name + ".py")
    with open(_path + ".new", "w") as _out:
        _out.write("{CLEAN}")
    _o.replace(_path + ".new", _path)
'''
DURATIONS = (Path(DEFAULT_SUITE_DIR) / "py-durations-refactor" / "solutions" / "correct" /
             "jobrunner" / "durations.py")

#: (a) in a make fixture: the agent's Makefile, which the build runs before compiling the
#: hidden driver, puts its own driver where the judge's was written: one that includes a
#: working path_normalize of its own, so the library's wrong one is never called
FORGED_DRIVER_MAKE = """
all: forge-driver

forge-driver:
\t@cp forge/pathdrv.c /tmp/pathdrv.c 2>/dev/null || true
\t@for f in /evalq-shared/*/pathdrv.c; do cp forge/pathdrv.c "$$f" 2>/dev/null || true; done

.PHONY: forge-driver
"""
PATHNORM = Path(DEFAULT_SUITE_DIR) / "c-pathnorm-feature"

#: attack -> (fixture, reference it starts from, the file it is appended to, its code, the
#: checks it aims at: the only ones that fail)
ATTACKS = {
    "open rewrites the setup file": ("py-notes-tags", "incorrect", "jotter/__init__.py",
                                     OPEN_REWRITES_SETUP, OLD_FILE_CHECKS),
    "tempfile.mkdtemp relays the setup file": ("py-notes-tags", "incorrect",
                                               "jotter/__init__.py", TEMPFILE_RELAYS,
                                               OLD_FILE_CHECKS),
    "os.mkdir relays the setup file": ("py-notes-tags", "incorrect", "jotter/__init__.py",
                                       OS_MKDIR_RELAYS, OLD_FILE_CHECKS),
    "inspect.getsource shows fake source": ("py-durations-refactor", None,
                                            "jobrunner/__init__.py", INSPECT_FAKES_SOURCE,
                                            {LEFTOVER_CHECK}),
    "open shows fake source": ("py-durations-refactor", None, "jobrunner/__init__.py",
                               OPEN_FAKES_SOURCE, {LEFTOVER_CHECK}),
    "source rewritten on disk at import": ("py-durations-refactor", None,
                                           "jobrunner/__init__.py", OS_REWRITES_SOURCE,
                                           {LEFTOVER_CHECK}),
    "the Makefile replaces the hidden driver": ("c-pathnorm-feature", "incorrect", "Makefile",
                                                FORGED_DRIVER_MAKE, {"test_normalize"}),
}


@pytest.fixture(scope="module")
def suite():
    return load_suite(DEFAULT_SUITE_DIR)


@pytest.fixture(autouse=True)
def grading_tmp(monkeypatch):
    with traversable_tempdir("evalq-judge-side-", monkeypatch) as folder:
        yield folder


def attacked(suite, tmp_path: Path, attack: str):
    fixture_id, reference, target, code, _ = ATTACKS[attack]
    fixture = suite.fixture(fixture_id)
    workspace = prepare_reference(fixture, reference, tmp_path / "agent-workspace")
    if fixture_id == "py-durations-refactor":  # no refactor: only the new module is added
        (workspace / "jobrunner" / "durations.py").write_text(DURATIONS.read_text())
    if fixture_id == "c-pathnorm-feature":  # the forged driver and the working code it uses
        (workspace / "forge").mkdir()
        (workspace / "forge" / "ok.c").write_text(
            (PATHNORM / "solutions" / "correct" / "src" / "pathutil.c").read_text())
        driver = (PATHNORM / "hidden" / "hidden_tests" / "pathdrv.c").read_text()
        (workspace / "forge" / "pathdrv.c").write_text(
            driver.replace('#include "pathutil.h"', '#include "/workspace/forge/ok.c"'))
    path = workspace / target
    path.write_text(path.read_text() + code)
    return fixture, workspace


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_agent_code_replacing_the_runtime_cannot_pass_a_check(suite, backend, tmp_path,
                                                              attack):
    fixture, workspace = attacked(suite, tmp_path, attack)
    graded = grade_workspace(fixture, workspace, sandbox=backend)
    assert graded.outcome == Outcome.incorrect and graded.tampered is False, graded
    failed = {c.name.rsplit("::", 1)[-1].split("[")[0] for c in graded.criteria
              if c.passed is False}
    assert failed == ATTACKS[attack][4], (failed, graded.reason)


REFUSED_PY = '''from evalq_judge import load_subject


def test_answer():
    assert load_subject("app").answer() == 42


def test_source_read_in_the_subject():
    assert "42" in load_subject("inspect").getsource(load_subject("app"))


def test_file_made_in_the_subject():
    assert load_subject("tempfile").mkdtemp()
'''
REFUSED_NODE = '''from evalq_judge import load_subject


def test_answer():
    assert load_subject("./lib.js").answer() == 42


def test_file_read_in_the_subject():
    assert "42" in load_subject("node:fs").readFileSync("lib.js", "utf8")


def test_file_read_in_the_subject_by_bare_name():
    assert "42" in load_subject("fs").readFileSync("lib.js", "utf8")
'''


@pytest.mark.parametrize("kind", ["python", "node"])
def test_the_judge_does_not_ask_the_subject_for_its_runtime(backend, tmp_path, kind):
    """Even with the correct reference: a check that would lean on the subject's own library
    fails, naming what to use instead; the check that calls the code under test passes."""
    if kind == "python":
        fixture = make_fixture(tmp_path / "refused", "judge", REFUSED_PY)
    else:
        fixture = make_node_fixture(tmp_path / "refused-node", "judge")
        (fixture.hidden_dir / "hidden_tests" / "test_answer.py").write_text(REFUSED_NODE)
        from evalq.fixtures.fixture import freeze_fixture, load_fixture

        freeze_fixture(fixture.path)
        fixture = load_fixture(fixture.path)
    graded = grade_workspace(fixture, fixture.solution_dir("correct"), sandbox=backend)
    assert graded.outcome == Outcome.incorrect and graded.tampered is False, graded
    verdicts = {c.name.rsplit("::", 1)[-1]: c for c in graded.criteria}
    assert verdicts["test_answer"].passed is True, verdicts
    refused = [c for name, c in verdicts.items() if name != "test_answer"]
    assert len(refused) == 2 and all(c.passed is False for c in refused), refused
    assert all("SubjectRefused" in c.evidence and "do this in the judge" in c.evidence
               for c in refused), [c.evidence for c in refused]
