"""Two commits of one agent compared, as a user does it: a tiny git repository whose fixer.py
is correct at tag `good`, broken at `bad` (a traceback, exit 2) and hostile at `hostile`
(it tries to change its own source), run as a `command` agent
`python3 {agent_dir}/fixer.py ...` in a commit-comparison study, in each agent sandbox.

Checked from outside: each commit's tree was mounted (the good commit's runs are correct, at
the documented path, with the workspace as the working directory), both are pinned by digest
and commit id in the lock and in `evalq compare`, which accepts the pair and names the two
commits; the hostile commit's writes into its source failed and the worker's copy still
matches the lock. With the sandbox `none` (the control) those writes succeed, so the check
can fail.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, run_cli
from test_agents_support import GIT_ENV, artifact, attempts, copy_fixture, run_study
from evalq.digest import tree_digest
from evalq.workers.sandbox.base import AGENT_DIR


#: the sibling module the fixer imports (a second file of the source, not argv[0])
PATCHES = '''import os


def apply_fix(root):
    path = os.path.join(root, "textutil", "slug.py")
    with open(path) as handle:
        text = handle.read()
    text = text.replace('r"[^a-z0-9]"', 'r"[^a-z0-9]+"')
    text = text.replace('title.lower())', 'title.lower()).strip("-")')
    with open(path, "w") as handle:
        handle.write(text)
'''

GOOD = '''import json, os, sys
sys.dont_write_bytecode = True
from patches import apply_fix

here = os.path.dirname(os.path.abspath(__file__))
apply_fix(os.getcwd())
with open(os.path.join(sys.argv[2], "report.txt"), "w") as out:
    json.dump({"here": here, "cwd": os.getcwd(), "workspace": sys.argv[1],
               "env": os.environ.get("EVALQ_AGENT_DIR")}, out)
'''

BAD = '''import sys, traceback
sys.dont_write_bytecode = True
try:
    from patches import apply_fix_v2
except ImportError:
    traceback.print_exc()
    sys.exit(2)
'''

HOSTILE = '''import json, os, sys
sys.dont_write_bytecode = True
from patches import apply_fix

here = os.path.dirname(os.path.abspath(__file__))
MARK = "changed-by-" + "a-run"  # spelled so that this file does not hold it until appended
with open(os.path.join(here, "fixer.py")) as handle:
    found = {"planted": os.path.exists(os.path.join(here, "planted.txt")),
             "appended": MARK in handle.read()}
tried = {}


def attempt(name, action):
    try:
        action()
        tried[name] = "ok"
    except OSError as exc:
        tried[name] = f"refused: {exc.strerror}"


def append():
    with open(os.path.join(here, "fixer.py"), "a") as handle:
        handle.write(f"# {MARK}\\n")


def plant():
    with open(os.path.join(here, "planted.txt"), "w") as handle:
        handle.write("left for the next run")


attempt("append_to_own_script", append)
attempt("plant_a_file", plant)
attempt("chmod_own_script", lambda: os.chmod(os.path.join(here, "fixer.py"), 0o777))
attempt("remove_sibling", lambda: os.unlink(os.path.join(here, "patches.py")))
attempt("make_a_folder", lambda: os.mkdir(os.path.join(here, "new")))
apply_fix(os.getcwd())
print(json.dumps({"type": "hostile-source", "here": here, "found": found, "tried": tried}))
'''


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def commit(repo: Path, fixer: str, tag: str) -> str:
    (repo / "fixer.py").write_text(fixer)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", tag)
    git(repo, "tag", tag)
    return git(repo, "rev-parse", "HEAD")


def agent_repo(folder: Path) -> dict[str, str]:
    """The repository with its three tagged commits; tag -> commit id."""
    folder.mkdir(parents=True)
    git(folder, "init", "-q")
    (folder / "patches.py").write_text(PATCHES)
    commits = {tag: commit(folder, text, tag)
               for tag, text in (("good", GOOD), ("bad", BAD), ("hostile", HOSTILE))}
    return commits


ARGV = ["python3", "{agent_dir}/fixer.py", "{workspace}", "{output_dir}"]


def conditions(tags, argv=ARGV) -> str:
    return "".join(f'''
[[conditions]]
name = "{tag}"
agent = "command"
source = {{ repo = "agent", commit = "{tag}" }}
settings = {{ argv = {json.dumps(argv)} }}
''' for tag in tags)


def write_study(folder: Path, fixture: Path, study_id: str, tags=("good", "bad", "hostile"),
                argv=ARGV, repetitions: int = 2) -> Path:
    path = folder / f"{study_id}.toml"
    path.write_text(f'''
id = "{study_id}"
mode = "commit-comparison"
fixtures = ["{fixture.as_posix()}"]
repetitions = {repetitions}
seed = 3

[budgets]
wall_seconds = 120
{conditions(tags, argv)}''')
    return path


@pytest.fixture(scope="module", params=["bwrap", "docker", "none"])
def compared(request, tmp_path_factory):
    backend = request.param
    if backend != "none":
        from evalq.workers.sandbox import get_agent_sandbox

        ok, why = get_agent_sandbox(backend).available()
        if not ok:
            pytest.fail(f"agent sandbox '{backend}' is not available: {why}", pytrace=False)
    tmp = tmp_path_factory.mktemp(f"commits-{backend}")
    commits = agent_repo(tmp / "agent")
    fixture = copy_fixture("py-slugify-bugfix", tmp / "fixtures")
    manifest = write_study(tmp, fixture, f"commits-{backend}")
    home = tmp / "home"
    # one trial at a time: the control's second hostile run starts after its first has ended
    report = run_study(manifest, home, {"EVALQ_AGENT_SANDBOX": backend}, ["--concurrency", "1"])
    lock = json.loads(manifest.with_name(manifest.stem + ".lock.json").read_text())
    return {"backend": backend, "home": home, "report": report, "lock": lock,
            "commits": commits, "manifest": manifest, "study": f"commits-{backend}",
            "rows": attempts(home)}


def _by_condition(compared) -> dict[str, list[dict]]:
    """The study's attempt rows by condition."""
    db = sqlite3.connect(compared["home"] / "evalq.db")
    condition_of = dict(db.execute("select id, condition from trials"))
    db.close()
    out: dict[str, list[dict]] = {}
    for row in compared["rows"]:
        out.setdefault(condition_of[row["trial_id"]], []).append(row)
    return out


def test_each_commit_is_mounted_and_the_good_one_is_correct(compared):
    rows = _by_condition(compared)
    assert [r["outcome"] for r in rows["good"]] == ["correct", "correct"]
    assert [r["outcome"] for r in rows["bad"]] == ["incorrect", "incorrect"]
    home = compared["home"]
    said = json.loads(artifact(home, rows["good"][0]["artifacts"]["final_report"]))
    expected = AGENT_DIR if compared["backend"] != "none" else said["env"]
    assert said["here"] == expected == said["env"]
    assert said["cwd"] == said["workspace"], "the agent's working directory is its workspace"
    stderr = artifact(home, rows["bad"][0]["artifacts"]["stderr"]).decode()
    assert "Traceback" in stderr and "apply_fix_v2" in stderr


def test_the_lock_pins_each_commit_and_its_tree(compared):
    sources, commits = compared["lock"]["agent_sources"], compared["commits"]
    for tag in ("good", "bad", "hostile"):
        assert sources[tag]["commit"] == commits[tag]
        assert sources[tag]["name"] == tag
        assert sources[tag]["digest"].startswith("sha256:")
    assert len({s["digest"] for s in sources.values()}) == 3
    assert compared["lock"]["agent_source_states"]["good"]["dirty"] == []
    assert "allow_dirty" not in compared["lock"]


def test_compare_accepts_the_pair_and_names_both_commits(compared, tmp_path):
    study, commits = compared["study"], compared["commits"]
    out = tmp_path / "cmp.json"
    proc = run_cli(["compare", f"{study}:good", f"{study}:bad", "--out", str(out)],
                   {"EVALQ_HOME": str(compared["home"])})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    digests = compared["lock"]["agent_sources"]
    assert f"commit {commits['good']} (good), agent source {digests['good']['digest']}" \
        in lines[1]
    assert f"commit {commits['bad']} (bad), agent source {digests['bad']['digest']}" in lines[2]
    result = json.loads(out.read_text())
    assert result["comparison"]["metrics"]["tpr"]["delta"] == pytest.approx(-1.0)
    pinned = result["comparison"]["pinned"]
    assert pinned["baseline"]["commit"] == commits["good"]
    assert pinned["candidate"]["agent_source"]["digest"] == digests["bad"]["digest"]
    # the study's own report: the pair is compatible, the commits are its only difference
    comps = {(c["baseline"], c["candidate"]): c for c in compared["report"]["comparisons"]}
    assert comps[("good", "bad")]["compatible"] is True


def _hostile_said(compared) -> list[dict]:
    home = compared["home"]
    said = []
    for row in _by_condition(compared)["hostile"]:
        stdout = artifact(home, row["artifacts"]["stdout"]).decode()
        said += [json.loads(l) for l in stdout.splitlines() if '"hostile-source"' in l]
    assert len(said) == 2, "the hostile agent did not report"
    return said


def test_a_hostile_agent_cannot_change_its_own_source(compared):
    said = _hostile_said(compared)
    cache = compared["home"] / "cache" / "agent-sources"
    digest = compared["lock"]["agent_sources"]["hostile"]["digest"]
    copy = cache / digest.replace(":", "-")
    # no run found what an earlier one tried to leave: each gets the locked tree
    assert not any(run["found"][k] for run in said for k in ("planted", "appended")), said
    if compared["backend"] == "none":  # the control: unsealed, its writes land
        assert all(v == "ok" for s in said for v in s["tried"].values()), said
        return
    for run in said:
        assert run["tried"] and all(v.startswith("refused") for v in run["tried"].values()), run
    assert tree_digest(copy) == digest  # the worker's copy is the locked tree, unchanged
    assert not (copy / "planted.txt").exists()


def test_a_changed_copy_is_replaced_before_the_next_run(tmp_path):
    """The worker's check: a copy that no longer matches the lock is never handed out."""
    from evalq.artifacts import ArtifactStore
    from evalq.fixtures.archive import pack_workspace
    from evalq.workers.agent_source import checked_source

    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "fixer.py").write_text(GOOD)
    digest = tree_digest(tree)
    store = ArtifactStore(tmp_path / "store")
    entry = {"digest": digest, "ref": store.put(pack_workspace(tree))}
    first = checked_source(store, entry, digest, tmp_path / "cache")
    (first / "fixer.py").write_text("print('changed')\n")
    (first / "planted.txt").write_text("x")
    again = checked_source(store, entry, digest, tmp_path / "cache")
    assert again == first and tree_digest(again) == digest
    assert not (again / "planted.txt").exists()
    assert oct(again.stat().st_mode & 0o777) == oct(0o755)


# ------------------------------------------------------------------ freezing, without runs
@pytest.fixture
def repo_study(tmp_path):
    commits = agent_repo(tmp_path / "agent")
    fixture = copy_fixture("py-slugify-bugfix", tmp_path / "fixtures")
    return tmp_path, commits, fixture


def test_a_dirty_repository_is_refused_unless_allowed(repo_study):
    tmp, commits, fixture = repo_study
    (tmp / "agent" / "patches.py").write_text(PATCHES + "# work in progress\n")
    manifest = write_study(tmp, fixture, "dirty", tags=("good", "bad"))
    refused = run_cli(["study", "freeze", str(manifest)])
    assert refused.returncode == 2
    line = refused.stderr.strip()
    assert len(line.splitlines()) == 1, line
    assert "conditions.0.source" in line and "uncommitted changes (patches.py)" in line
    assert "--allow-dirty" in line
    assert not manifest.with_name("dirty.lock.json").exists()
    home = {"EVALQ_HOME": str(tmp / "home")}
    run_refused = run_cli(["run", str(manifest)], home)
    assert run_refused.returncode == 2 and "--allow-dirty" in run_refused.stderr
    allowed = run_cli(["run", str(manifest), "--allow-dirty", "--limit", "1"], home)
    assert allowed.returncode == 0, allowed.stderr
    frozen = run_cli(["study", "freeze", str(manifest)])  # already frozen: says what it holds
    assert frozen.returncode == 0, frozen.stderr
    assert f"agent source of good: commit {commits['good']} (good)" in frozen.stdout
    assert "1 uncommitted change(s)" in frozen.stdout
    lock = json.loads(manifest.with_name("dirty.lock.json").read_text())
    assert lock["allow_dirty"] is True
    assert lock["agent_source_states"]["good"]["dirty"] == ["patches.py"]
    # the commit is exported, not the work tree: the change is not in the frozen tree
    assert lock["agent_sources"]["good"]["commit"] == commits["good"]


def folder_study(folder: Path, study_id: str, fixture: Path, source: str) -> Path:
    """A one-condition study whose `command` agent comes from the folder `source`."""
    manifest = folder / f"{study_id}.toml"
    manifest.write_text(f'''
id = "{study_id}"
fixtures = ["{fixture.as_posix()}"]
[[conditions]]
name = "here"
agent = "command"
source = {{ path = "{source}" }}
settings = {{ argv = {json.dumps(ARGV)} }}
''')
    return manifest


def test_a_folder_source_with_untracked_files_is_dirty(repo_study):
    tmp, commits, fixture = repo_study
    (tmp / "agent" / "notes.txt").write_text("not committed")
    manifest = folder_study(tmp, "folder", fixture, "agent")
    refused = run_cli(["study", "freeze", str(manifest)])
    assert refused.returncode == 2 and "notes.txt" in refused.stderr, refused.stderr
    (tmp / "agent" / "notes.txt").unlink()
    done = run_cli(["study", "freeze", str(manifest)])
    assert done.returncode == 0, done.stderr
    lock = json.loads((tmp / "folder.lock.json").read_text())
    assert lock["agent_source_states"]["here"] == {"head": commits["hostile"], "dirty": []}
    exported = tmp / "exported"
    exported.mkdir()
    for name in ("fixer.py", "patches.py"):
        (exported / name).write_bytes((tmp / "agent" / name).read_bytes())
    assert lock["agent_sources"]["here"] == {"digest": tree_digest(exported)}
    (tmp / "agent" / "fixer.py").write_text(BAD)  # changed after freezing
    changed = run_cli(["study", "validate", str(manifest)])
    assert changed.returncode == 2
    assert "frozen inputs changed" in changed.stderr and "agent_sources.here" in changed.stderr


def test_a_moved_tag_is_caught_by_the_lock_check(repo_study):
    tmp, commits, fixture = repo_study
    manifest = write_study(tmp, fixture, "moved", tags=("good", "bad"))
    assert run_cli(["study", "freeze", str(manifest)]).returncode == 0
    git(tmp / "agent", "tag", "-f", "bad", commits["hostile"])
    proc = run_cli(["study", "validate", str(manifest)])
    assert proc.returncode == 2
    assert "frozen inputs changed" in proc.stderr and "agent_sources.bad" in proc.stderr
    assert commits["hostile"][:12] in proc.stderr and commits["bad"][:12] in proc.stderr


def test_a_commit_comparison_refuses_any_other_difference(repo_study):
    tmp, _, fixture = repo_study
    manifest = write_study(tmp, fixture, "differs", tags=("good", "bad"))
    text = manifest.read_text()
    # the first condition's argv gets one more argument; the second's does not
    manifest.write_text(text.replace('"{output_dir}"]', '"{output_dir}", "--fast"]', 1))
    proc = run_cli(["study", "validate", str(manifest)])
    assert proc.returncode == 2
    assert "field 'conditions.1.settings'" in proc.stderr
    assert "differ only in their source" in proc.stderr and "'bad'" in proc.stderr


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
def test_argv0_may_be_a_program_of_the_source(tmp_path, backend):
    """`{agent_dir}/run.sh` runs from the mounted source, with the workspace as its cwd."""
    from evalq.fixtures.fixture import load_fixture, materialize
    from evalq.models import Condition, Limits
    from evalq.workers.agents.base import AgentContext
    from evalq.workers.agents.registry import get_adapter
    from evalq.workers.profile import new_profile

    source = tmp_path / "source"
    source.mkdir()
    (source / "run.sh").write_text('#!/bin/sh\necho "$0 $(pwd)" > "$1/report.txt"\n')
    (source / "run.sh").chmod(0o755)
    fixture = load_fixture(copy_fixture("py-slugify-bugfix", tmp_path / "fx"))
    profile = new_profile(tmp_path / "runs")
    materialize(fixture, profile.workspace)
    condition = Condition(name="c", agent="command", source={"path": "source"},
                          settings={"argv": ["{agent_dir}/run.sh", "{output_dir}"]})
    ctx = AgentContext(fixture=fixture, condition=condition, profile=profile, prompt="fix it",
                       limits=Limits(wall_seconds=60), sandbox=backend,
                       evalq_home=tmp_path / "home", agent_source=source)
    result = get_adapter("command").run(ctx)
    assert result.exit_code == 0, result.stderr
    assert result.final_report == f"{AGENT_DIR}/run.sh {profile.workspace}\n"


def test_compare_of_two_studies_refuses_what_else_differs(tmp_path):
    """One study per commit: accepted when only the source differs, refused (naming the
    setting) when the argv differs too."""
    import sys

    sys.path.insert(0, str(ROOT / "tests" / "report"))
    from report_native_rows import make_study
    from evalq.results.store import StudyRow, init_db
    from sqlmodel import Session

    url = f"sqlite:///{tmp_path}/s.db"
    argv = {"argv": ["python3", "{agent_dir}/fixer.py"]}
    for study, tag, settings in (("v2", "aaa", argv), ("v3", "bbb", argv),
                                 ("v3-fast", "bbb", {"argv": [*argv["argv"], "--fast"]})):
        make_study(url, study, conditions=[{"name": "main", "agent": "command",
                                            "settings": settings,
                                            "source": {"repo": ".", "commit": tag}}])
        with Session(init_db(url)) as session:
            row = session.get(StudyRow, study)
            row.lock = dict(row.lock, agent_sources={"main": {
                "digest": f"sha256:{tag * 21}", "commit": tag * 13, "name": tag}})
            session.add(row)
            session.commit()
    env = {"EVALQ_DATABASE_URL": url}
    accepted = run_cli(["compare", "v2", "v3"], env)
    assert accepted.returncode == 0, accepted.stderr
    assert f"commit {'aaa' * 13} (aaa)" in accepted.stdout
    assert f"commit {'bbb' * 13} (bbb)" in accepted.stdout
    refused = run_cli(["compare", "v2", "v3-fast"], env)
    assert refused.returncode == 2
    assert "settings_digest" in refused.stderr and "settings.argv" in refused.stderr


def test_a_study_inside_the_agents_repository(tmp_path):
    """The README's layout: manifest, fixtures and agent in one repository. The whole tree
    would show the agent the fixture's hidden tests, so it is refused; the agent's folder at
    the commit is the source, and the lock written beside the manifest leaves it clean."""
    repo = tmp_path / "repo"
    agent_repo(repo / "agent")  # its files, folded into one repository with the study
    shutil.rmtree(repo / "agent" / ".git")
    git(repo, "init", "-q")
    copy_fixture("py-slugify-bugfix", repo / "fixtures")
    manifest = repo / "study.toml"
    whole = f'''
id = "inside"
fixtures = ["fixtures/"]
[[conditions]]
name = "v1"
agent = "command"
source = {{ repo = ".", commit = "v1" }}
settings = {{ argv = {json.dumps(ARGV)} }}
'''
    manifest.write_text(whole)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "study")
    git(repo, "tag", "v1")
    refused = run_cli(["study", "freeze", str(manifest)])
    assert refused.returncode == 2
    assert "holds a fixture (fixtures/py-slugify-bugfix/)" in refused.stderr, refused.stderr
    manifest.write_text(whole.replace('commit = "v1" }', 'commit = "v1", path = "agent" }'))
    git(repo, "commit", "-q", "-am", "the agent's folder only")
    git(repo, "tag", "-f", "v1")
    done = run_cli(["study", "freeze", str(manifest)])
    assert done.returncode == 0, done.stderr
    lock = json.loads((repo / "study.lock.json").read_text())
    assert lock["agent_sources"]["v1"]["path"] == "agent"
    assert lock["agent_sources"]["v1"]["digest"] == tree_digest(repo / "agent")
    assert lock["agent_source_states"]["v1"]["dirty"] == []
    again = run_cli(["study", "validate", str(manifest)])
    assert again.returncode == 0 and "(frozen)" in again.stdout, again.stderr


@pytest.mark.parametrize("condition, field, words", [
    ('source = { path = "agent" }\ncommit = "v2"\nsettings = { argv = ["true"] }',
     "conditions.0.commit", "takes its commit from the source"),
    ('settings = { argv = ["python3", "{agent_dir}/fixer.py"] }',
     "conditions.0.settings", "{agent_dir} names the condition's agent source"),
    ('source = { commit = "v2" }\nsettings = { argv = ["true"] }',
     "conditions.0.source", "repo = "),
    ('source = { path = "nowhere" }\nsettings = { argv = ["true"] }',
     "conditions.0.source.path", "is not a folder"),
    ('source = { repo = "agent", commit = "v9" }\nsettings = { argv = ["true"] }',
     "conditions.0.source.commit", "commit 'v9' is not in the repository"),
])
def test_a_bad_source_is_one_line_naming_the_field(repo_study, condition, field, words):
    tmp, _, fixture = repo_study
    manifest = tmp / "bad.toml"
    manifest.write_text(f'id = "bad"\nfixtures = ["{fixture.as_posix()}"]\n'
                        f'[[conditions]]\nname = "c"\nagent = "command"\n{condition}\n')
    proc = run_cli(["study", "validate", str(manifest)])
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert f"field '{field}'" in proc.stderr and words in proc.stderr, proc.stderr


def test_the_studys_own_files_are_not_the_agents(repo_study):
    """A folder source holding the manifest, its lock and EVALQ_HOME: none of them is copied
    or makes the repository dirty, so freezing and checking again agree."""
    tmp, _, fixture = repo_study
    agent = tmp / "agent"
    home = agent / ".evalq"
    (home / "artifacts").mkdir(parents=True)
    (home / "artifacts" / "blob").write_text("a stored artifact")
    manifest = agent / "study.toml"
    manifest.write_text(f'''
id = "here"
fixtures = ["{fixture.as_posix()}"]
[[conditions]]
name = "here"
agent = "command"
source = {{ path = "." }}
settings = {{ argv = {json.dumps(ARGV)} }}
''')
    env = {"EVALQ_HOME": str(home)}
    done = run_cli(["study", "freeze", str(manifest)], env)
    assert done.returncode == 0, done.stderr
    lock = json.loads((agent / "study.lock.json").read_text())
    exported = tmp / "exported"
    exported.mkdir()
    for name in ("fixer.py", "patches.py"):
        (exported / name).write_bytes((agent / name).read_bytes())
    assert lock["agent_sources"]["here"] == {"digest": tree_digest(exported)}
    again = run_cli(["study", "validate", str(manifest)], env)
    assert again.returncode == 0 and "(frozen)" in again.stdout, again.stderr


def test_a_folder_the_repository_around_it_ignores_is_refused_in_one_line(tmp_path):
    """Every file git ignores is left out of a folder source; a folder left empty that way is
    named as such (it was a crash on a missing folder)."""
    outer = tmp_path / "outer"
    (outer / "agent").mkdir(parents=True)
    git(outer, "init", "-q")
    (outer / ".gitignore").write_text("agent/\n")
    git(outer, "add", ".gitignore")
    git(outer, "commit", "-q", "-m", "ignore the agent")
    (outer / "agent" / "fixer.py").write_text(GOOD)
    fixture = copy_fixture("py-slugify-bugfix", tmp_path / "fixtures")
    manifest = folder_study(tmp_path, "ignored", fixture, "outer/agent")
    refused = run_cli(["study", "freeze", str(manifest)])
    line = refused.stderr.strip()
    assert refused.returncode == 2 and len(line.splitlines()) == 1, line
    assert "has no files (the repository around it ignores every file there)" in line, line
    assert not (tmp_path / "ignored.lock.json").exists()
