"""The journey evalq exists for, as a user makes it with the CLI alone: their own agent at two
commits of a git repository, the first correct, the second broken (it looks for a file its
commit lacks: FileNotFoundError, a non-zero exit), compared in a commit-comparison study on the
embedded default, in each agent sandbox.

Checked from outside, in the order a user meets it: `evalq run --dry-run --check` catches the
broken commit before launch (non-zero exit, naming the condition, showing its stderr) and
writes nothing; the study then runs both commits, each mounted from the lock (the correct one
solves the task, the broken one's traceback names the mount path) and pinned by digest and
commit id; the broken commit's runs are agent errors with their stderr in `evalq status`, in
report.md and report.json and on the transcript page; the claims carry the warning; and
`evalq compare` accepts the pair and names both commits.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT, run_cli
from test_agents_support import GIT_ENV, copy_fixture, run_study
from evalq.analysis.agent_errors import ERROR_EXIT
from evalq.report.transcripts import page_name
from evalq.workers.sandbox.base import AGENT_DIR


#: v1 puts the fixed module it ships into the workspace (the working directory)
V1 = '''import os, shutil, sys
here = os.path.dirname(os.path.abspath(__file__))
shutil.copyfile(os.path.join(here, "slug_fixed.py"), os.path.join("textutil", "slug.py"))
print("fixed", file=sys.stderr)
'''
#: v2 looks for the module under a name its commit does not have
V2 = '''import os, shutil, sys
here = os.path.dirname(os.path.abspath(__file__))
print("v2: copying the fix", file=sys.stderr)
shutil.copyfile(os.path.join(here, "slug_v2.py"), os.path.join("textutil", "slug.py"))
'''
ARGV = ["python3", "{agent_dir}/fixer.py"]
FIXED = ROOT / "fixtures" / "py-slugify-bugfix" / "solutions" / "correct" / "textutil" / "slug.py"


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV}, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def agent_repo(folder: Path) -> dict[str, str]:
    """The agent's repository: tag -> commit id."""
    folder.mkdir(parents=True)
    git(folder, "init", "-q")
    (folder / "slug_fixed.py").write_text(FIXED.read_text())
    commits = {}
    for tag, text in (("v1", V1), ("v2", V2)):
        (folder / "fixer.py").write_text(text)
        git(folder, "add", "-A")
        git(folder, "commit", "-q", "-m", tag)
        git(folder, "tag", tag)
        commits[tag] = git(folder, "rev-parse", "HEAD")
    return commits


def write_study(folder: Path, fixture: Path, study_id: str) -> Path:
    conditions = "".join(f'''
[[conditions]]
name = "{tag}"
agent = "command"
source = {{ repo = "agent", commit = "{tag}" }}
settings = {{ argv = {json.dumps(ARGV)} }}
''' for tag in ("v1", "v2"))
    path = folder / "study.toml"
    path.write_text(f'''id = "{study_id}"
mode = "commit-comparison"
fixtures = ["{fixture.as_posix()}"]
repetitions = 2
seed = 7

[budgets]
wall_seconds = 120
{conditions}''')
    return path


@pytest.fixture(scope="module", params=["bwrap", "docker"])
def journey(request, tmp_path_factory):
    backend = request.param
    from evalq.workers.sandbox import get_agent_sandbox

    ok, why = get_agent_sandbox(backend).available()
    if not ok:
        pytest.fail(f"agent sandbox '{backend}' is not available: {why}", pytrace=False)
    tmp = tmp_path_factory.mktemp(f"journey-{backend}")
    commits = agent_repo(tmp / "agent")
    fixture = copy_fixture("py-slugify-bugfix", tmp / "fixtures")
    study = f"own-agent-{backend}"
    manifest = write_study(tmp, fixture, study)
    home = tmp / "home"
    env = {"EVALQ_HOME": str(home), "EVALQ_AGENT_SANDBOX": backend}
    check = run_cli(["run", str(manifest), "--dry-run", "--check"], env, timeout=300)
    written_by_check = sorted(p.name for p in home.iterdir()) if home.exists() else []
    frozen_by_check = manifest.with_name("study.lock.json").exists()
    report = run_study(manifest, home, {"EVALQ_AGENT_SANDBOX": backend})
    lock = json.loads(manifest.with_name("study.lock.json").read_text())
    return {"backend": backend, "env": env, "home": home, "check": check, "report": report,
            "lock": lock, "commits": commits, "study": study, "manifest": manifest,
            "written_by_check": written_by_check, "frozen_by_check": frozen_by_check}


def _v2_rows(journey) -> list[dict]:
    rows = [r for r in journey["report"]["trial_rows"] if r["condition"] == "v2"]
    assert len(rows) == 2
    return rows


def test_the_check_catches_the_broken_commit_before_launch(journey):
    check, commits = journey["check"], journey["commits"]
    assert check.returncode == 1, check.stdout + check.stderr
    out = check.stdout
    assert f"in the agent sandbox {journey['backend']}" in out
    v1 = next(l for l in out.splitlines() if l.startswith("  v1: "))
    v2 = next(l for l in out.splitlines() if l.startswith("  v2: "))
    assert v1.startswith("  v1: started; exit 0") and commits["v1"] in v1
    assert v2.startswith(f"  v2: FAILED: the agent {ERROR_EXIT}; exit 1") and commits["v2"] in v2
    stderr = out[out.index(v2):]
    assert "v2: copying the fix" in stderr and "FileNotFoundError" in stderr
    assert f"{AGENT_DIR}/slug_v2.py" in stderr  # it ran from its mounted source
    assert "condition(s) v2 did not run cleanly" in check.stderr
    assert "nothing was enqueued or written" in out
    assert journey["written_by_check"] == [], "the check wrote under EVALQ_HOME"
    assert journey["frozen_by_check"] is False, "the check froze the study"


def test_both_commits_are_mounted_and_pinned(journey):
    sources, commits = journey["lock"]["agent_sources"], journey["commits"]
    for tag in ("v1", "v2"):
        assert sources[tag]["commit"] == commits[tag] and sources[tag]["name"] == tag
        assert sources[tag]["digest"].startswith("sha256:")
    assert sources["v1"]["digest"] != sources["v2"]["digest"]
    outcomes = {r["condition"]: set() for r in journey["report"]["trial_rows"]}
    for r in journey["report"]["trial_rows"]:
        outcomes[r["condition"]].add(r["outcome"])
    assert outcomes == {"v1": {"correct"}, "v2": {"incorrect"}}  # the outcome stays incorrect
    for row in _v2_rows(journey):  # its traceback names the file at the documented mount
        assert row["stderr_last_line"].startswith("FileNotFoundError")
        assert f"{AGENT_DIR}/slug_v2.py" in row["stderr_last_line"]


def test_the_report_counts_the_broken_commits_runs_as_agent_errors(journey):
    report = journey["report"]
    assert report["agent_errors"] == {"v1": {"runs": 2, "errors": 0, "by_kind": {}},
                                      "v2": {"runs": 2, "errors": 2,
                                             "by_kind": {ERROR_EXIT: 2}}}
    warning = f"condition v2: 2/2 runs {ERROR_EXIT}"
    assert warning in report["claims"]["reasons"]
    # commit-comparison mode runs no tests (its claims are descriptive while nothing weakens
    # them); the broken commit's warning makes them exploratory
    assert report["claims"]["status"] == "exploratory"
    for row in _v2_rows(journey):
        assert (row["exit_code"], row["model_calls"], row["agent_error"], row["stop_reason"]) \
            == (1, None, ERROR_EXIT, "exit 1")
    v1 = next(r for r in report["trial_rows"] if r["condition"] == "v1")
    assert (v1["exit_code"], v1["agent_error"], v1["stderr_last_line"]) == (0, None, None)
    folder = Path(journey["home"]) / "reports" / journey["study"]
    md = (folder / "report.md").read_text()
    assert warning in md
    section = md[md.index("## Agent errors"):]
    assert "| v2 | 2 | 2 | exited with an error: 2 |" in section
    for row in _v2_rows(journey):
        line = next(l for l in section.splitlines() if l.startswith(f"| {row['trial_id']} "))
        assert "exit 1" in line and "FileNotFoundError" in line
    html = (folder / "report.html").read_text()
    link = page_name(_v2_rows(journey)[0]["trial_id"])
    assert f'href="{link}"' in html


def test_the_transcript_page_shows_how_each_run_ended(journey):
    folder = Path(journey["home"]) / "reports" / journey["study"]
    broken = (folder / page_name(_v2_rows(journey)[0]["trial_id"])).read_text()
    for words in ("outcome: incorrect", "exit status: exit 1", "model calls: unavailable",
                  "stop reason: exit 1", f"the agent {ERROR_EXIT}", "v2: copying the fix",
                  "FileNotFoundError", "failed checks: "):
        assert words in broken, words
    fixed = next(r for r in journey["report"]["trial_rows"] if r["condition"] == "v1")
    page = (folder / page_name(fixed["trial_id"])).read_text()
    assert "outcome: correct" in page and "exit status: exit 0" in page
    diff = page[page.index("<h2>Diff</h2>"):page.index("<h2>Stderr")]
    assert "+    return _NOT_WORD.sub(&quot;-&quot;, title.lower()).strip(&quot;-&quot;)" in diff


def test_status_shows_the_broken_commits_runs(journey):
    proc = run_cli(["status", journey["study"]], journey["env"])
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "agent errors   v1 0/2, v2 2/2 (exited with an error 2)" in out
    assert f"warning: condition v2: 2/2 runs {ERROR_EXIT}" in out
    for row in _v2_rows(journey):
        line = next(l for l in out.splitlines() if row["trial_id"] in l)
        assert "exit 1" in line and "stderr: FileNotFoundError" in line
    data = json.loads(run_cli(["status", journey["study"], "--json"], journey["env"]).stdout)
    assert data["agent_errors"] == journey["report"]["agent_errors"]


def test_compare_accepts_the_pair_and_names_the_commits(journey):
    study, commits = journey["study"], journey["commits"]
    proc = run_cli(["compare", f"{study}:v1", f"{study}:v2"], journey["env"])
    assert proc.returncode == 0, proc.stderr
    digests = journey["lock"]["agent_sources"]
    assert f"commit {commits['v1']} (v1), agent source {digests['v1']['digest']}" in proc.stdout
    assert f"commit {commits['v2']} (v2), agent source {digests['v2']['digest']}" in proc.stdout
    # the broken side is named as such, not read as a weak agent
    assert f"warning: condition {study}:v2: 2/2 runs {ERROR_EXIT}" in proc.stdout, proc.stdout
    assert f"condition {study}:v1" not in proc.stdout


def test_check_goes_with_dry_run(tmp_path):
    """`--check` alone is refused in one line, before anything is read or written."""
    proc = run_cli(["run", str(tmp_path / "study.toml"), "--check"],
                   {"EVALQ_HOME": str(tmp_path / "home")})
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "field '--check'" in proc.stderr
    assert "--dry-run" in proc.stderr and not (tmp_path / "home").exists()


def test_the_checks_stderr_cannot_rewrite_the_terminal():
    """The check prints the agent's stderr: escape sequences and bidi overrides are spaces,
    every line is bounded, a traceback keeps its indentation."""
    from evalq.cli.dry_run import _check_lines
    from evalq.workers.agent_check import AgentCheck

    tail = "Traceback:\n  File \"x\"\x1b[2J\x1b]0;owned\x07\n\u202eevil\u202c" + "y" * 5000
    check = AgentCheck(condition="v2", fixture="f", problem=f"the agent {ERROR_EXIT}",
                       exit_code=3, model_calls=0, stop_reason="exit 3\x1b[31m",
                       stderr_tail=tail, duration_seconds=0.1)
    lines = _check_lines(check)
    text = "\n".join(lines)
    assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text
    assert lines[0].startswith(f"  v2: FAILED: the agent {ERROR_EXIT}; exit 3, model calls 0")
    assert lines[2] == "      Traceback:" and lines[3].startswith('        File "x"')
    assert max(len(line) for line in lines) < 400
