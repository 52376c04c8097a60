"""First attempt vs eventual success within a session, end to end in both agent sandboxes.

A fixture declares its visible check (`python3 -m pytest`); three `command` agents run on it:
one checks a plausible wrong fix, then repairs it (first attempt incorrect, eventually correct,
two repair runs); one never runs the check (first attempt null, with the reason); one checks
the wrong fix and then tries to rewrite that first attempt (writing into the shim's folder,
forging shim messages, killing a check run, planting snapshot-shaped files, hunting for the
snapshot). The hostile one's first attempt stays incorrect and its snapshot holds the wrong
code. The report's two rates, per condition, are checked against a computation of their own
from the attempt rows.
"""

from __future__ import annotations

import io
import json
import shutil
import sqlite3
import sys
import tarfile
import gzip
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "agents"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from conftest import FIXTURES, run_cli  # noqa: E402
from test_agents_support import artifact, committed_folder, run_study  # noqa: E402
from evalq.graders.sandbox.cleanup import remove_tree  # noqa: E402

TRACK = "directed-integration"
HERE = Path(__file__).resolve().parent


def checked_fixture(root: Path) -> Path:
    """py-slugify-bugfix with a track and its visible check declared, frozen."""
    from evalq.fixtures.fixture import freeze_fixture

    dest = root / "slug-checked"
    shutil.copytree(FIXTURES / "py-slugify-bugfix", dest)
    manifest = dest / "fixture.toml"
    text = manifest.read_text().replace('id = "py-slugify-bugfix"', 'id = "slug-checked"')
    text = text.replace('toolchain = "python"',
                        f'toolchain = "python"\ntrack = "{TRACK}"\npackage = "textutil"')
    manifest.write_text(text + '\n[visible_check]\ncommand = ["python3", "-m", "pytest"]\n')
    freeze_fixture(dest)
    return dest


def agent_source(root: Path, agent: Path = HERE / "first_check_agent.py") -> Path:
    """The agents' folder (`agent` as agent.py, the wrong and right fixes), committed."""
    source = root / "agent"
    source.mkdir()
    shutil.copyfile(agent, source / "agent.py")
    solutions = FIXTURES / "py-slugify-bugfix" / "solutions"
    shutil.copyfile(solutions / "incorrect" / "textutil" / "slug.py", source / "wrong_slug.py")
    shutil.copyfile(solutions / "correct" / "textutil" / "slug.py", source / "right_slug.py")
    return committed_folder(source)


def stored_rows(home: Path) -> dict[str, dict]:
    db = sqlite3.connect(home / "evalq.db")
    db.row_factory = sqlite3.Row
    rows = [dict(r) for r in db.execute(
        "select a.*, t.condition from attempts a join trials t on t.id = a.trial_id")]
    db.close()
    out: dict[str, list] = {}
    for row in rows:
        for key in ("artifacts", "session_checks", "first_check_grade"):
            row[key] = json.loads(row[key]) if row[key] else None
        out.setdefault(row["condition"], []).append(row)
    return out


def slug_in(archive: bytes) -> str:
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(archive))) as tar:
        return tar.extractfile("textutil/slug.py").read().decode()


def own_rate(rows: list[dict], column: str) -> float | None:
    """The share of correct among the rows judged correct or incorrect (one task here, so the
    mean over tasks is this share)."""
    judged = [r[column] for r in rows if r[column] in ("correct", "incorrect", "timed_out")]
    return sum(v == "correct" for v in judged) / len(judged) if judged else None


@pytest.mark.parametrize("sandbox", ["bwrap", "docker", "bwrap-without-sys-admin"])
def test_first_check_and_eventual_success_are_kept_apart(tmp_path, tmp_path_factory, sandbox):
    wrap = None
    if sandbox == "bwrap-without-sys-admin":  # as in a container: bwrap runs as the agent user
        from no_sys_admin import command, let_agent_pass
        from evalq.workers.sandbox.paths import evalq_python_paths

        let_agent_pass(tmp_path, tmp_path_factory.getbasetemp())
        wrap = lambda argv: command(argv, [*evalq_python_paths(), tmp_path / "home"])  # noqa: E731
    fixture = checked_fixture(tmp_path / "fixtures")
    source = agent_source(tmp_path)
    conditions = "".join(
        f'\n[[conditions]]\nname = "{mode}"\nagent = "command"\n'
        f'source = {{ path = "{source.as_posix()}" }}\n'
        f'settings = {{ argv = ["python3", "{{agent_dir}}/agent.py", "{mode}"] }}\n'
        for mode in ("repair", "never", "hostile"))
    study = tmp_path / "study.toml"
    study.write_text(f'id = "first-check"\nfixtures = ["{fixture.as_posix()}"]\n'
                     'repetitions = 2\nmax_attempts = 1\nseed = 5\n[budgets]\n'
                     'wall_seconds = 120\n' + conditions)
    home = tmp_path / "home"
    try:
        report = run_study(study, home, {"EVALQ_AGENT_SANDBOX": sandbox.split("-")[0]},
                           wrap=wrap)
        rows = stored_rows(home)
        wrong = (source / "wrong_slug.py").read_text()
        for row in rows["repair"]:
            assert row["outcome"] == "correct", row["reason"]
            assert (row["first_check_result"], row["eventual_result"]) == ("incorrect",
                                                                             "correct")
            checks = row["session_checks"]
            assert checks["check_runs"] == 3 and checks["declared"][:3] == [
                "python3", "-m", "pytest"]
            assert checks["first_args"][:2] == ["-m", "pytest"]
            cost = checks["repair_cost"]
            assert cost["repair_check_runs"] == 2 and cost["elapsed_seconds"] > 0
            # a command agent records no tool calls and no gateway metered it: unavailable
            assert cost["commands_after_first_check"] is None
            assert "no tool calls" in cost["unavailable"]["commands_after_first_check"]
            assert cost["input_tokens_after_first_check"] is None
            assert cost["human_interventions"] is None
            assert slug_in(artifact(home, row["artifacts"]["first_check_workspace"])) == wrong
            assert row["first_check_grade"]["criteria"]  # the failed hidden checks, as evidence
        for row in rows["never"]:
            assert row["outcome"] == "correct"
            assert row["first_check_result"] is None and row["eventual_result"] == "correct"
            assert "never ran the visible check" in row["first_check_reason"]
            assert row["session_checks"]["check_runs"] == 0
            assert row["session_checks"]["repair_cost"] is None
            assert "first_check_workspace" not in row["artifacts"]
        for row in rows["hostile"]:
            assert row["outcome"] == "correct", row["reason"]
            assert row["first_check_result"] == "incorrect", row["first_check_reason"]
            assert slug_in(artifact(home, row["artifacts"]["first_check_workspace"])) == wrong
            said = artifact(home, row["artifacts"]["stdout"]).decode()
            assert "WROTE" not in said and "FOUND SNAPSHOT" not in said, said
            # its forged messages count as check runs (a cost it put on itself), no more
            assert row["session_checks"]["check_runs"] >= 3
            assert row["session_checks"]["ignored_messages"] >= 1

        block = report["session_first_check"][TRACK]
        for name, condition_rows in rows.items():
            entry = block[name]
            assert entry["first_check"]["estimate"] == own_rate(condition_rows,
                                                                "first_check_result")
            assert entry["eventual"]["estimate"] == own_rate(condition_rows, "outcome")
            assert entry["runs"] == len(condition_rows) == 2
        assert block["repair"]["first_check"]["estimate"] == 0.0
        assert block["repair"]["eventual"]["estimate"] == 1.0
        assert block["repair"]["repaired"] == 2
        assert block["repair"]["repair_cost"]["repair_check_runs"]["median"] == 2
        assert block["never"]["first_check"]["estimate"] is None
        assert block["never"]["first_check"]["runs"]["unresolved"] == 2
        assert block["never"]["never_checked"] == 2
        # the queue's first valid attempt stays its own figure, under its own name
        assert report["conditions"]["repair"]["first_attempt"]["success_rate"] == 1.0
        markdown = next(home.rglob("report.md")).read_text()
        assert "## First visible check vs eventual success" in markdown
        assert "| first-check success | 0.000" in markdown
        html = next(home.rglob("report.html")).read_text()
        assert "First visible check vs eventual success" in html
        shown = run_cli(["show", rows["repair"][0]["trial_id"]], {"EVALQ_HOME": str(home)})
        assert "first visible check: incorrect" in shown.stdout
        assert "eventual: correct" in shown.stdout and "2 check run(s) after the first" \
            in shown.stdout and "human interventions unavailable" in shown.stdout
        shown = run_cli(["show", rows["never"][0]["trial_id"]], {"EVALQ_HOME": str(home)})
        assert "first visible check: unavailable (the agent never ran" in shown.stdout
        if sandbox == "bwrap":  # grading alone, the same in both: a regrade keeps them apart
            regraded = run_cli(["regrade", "first-check", "--outcome", "correct"],
                               {"EVALQ_HOME": str(home)}, timeout=600)
            assert regraded.returncode == 0, regraded.stderr[-2000:]
            again = stored_rows(home)
            for row in again["repair"] + again["hostile"]:
                assert row["regrades"] == 1
                assert (row["first_check_result"], row["eventual_result"]) == ("incorrect",
                                                                                 "correct")
    finally:
        assert remove_tree(home) == []


def test_a_timed_out_run_keeps_its_outcome_and_has_its_first_check_graded(tmp_path):
    """bwrap only: the agent sandbox plays no part beyond the journey above."""
    fixture = checked_fixture(tmp_path / "fixtures")
    source = agent_source(tmp_path)
    study = tmp_path / "study.toml"
    study.write_text(f'id = "late"\nfixtures = ["{fixture.as_posix()}"]\nrepetitions = 1\n'
                     'max_attempts = 1\n[budgets]\nwall_seconds = 6\n\n[[conditions]]\n'
                     f'name = "late"\nagent = "command"\nsource = {{ path = "{source}" }}\n'
                     'settings = { argv = ["python3", "{agent_dir}/agent.py", "late"] }\n')
    home = tmp_path / "home"
    try:
        report = run_study(study, home, {"EVALQ_AGENT_SANDBOX": "bwrap"})
        (row,) = stored_rows(home)["late"]
        assert row["outcome"] == "timed_out" and "wall time" in row["reason"]
        assert (row["first_check_result"], row["eventual_result"]) == ("correct", "timed_out")
        assert row["session_checks"]["check_runs"] >= 2
        assert row["session_checks"]["repair_cost"]["repair_check_runs"] >= 1
        entry = report["session_first_check"][TRACK]["late"]
        assert (entry["first_check"]["estimate"], entry["eventual"]["estimate"]) == (1.0, 0.0)
        assert entry["lost_after_first_check"] == 1
    finally:
        assert remove_tree(home) == []
