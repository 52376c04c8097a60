"""The adoption-baseline protocol, end to end as written, on the embedded default with the
bubblewrap agent sandbox.

A pre-registered JSON task manifest: a free-selection task the package suits, one it does not
(a correct exclusion is the success, judged by named criteria), and a directed-integration
task whose fixture declares a visible check. Two conditions (no skill, installed skill), two
repetitions. On the directed task the no-skill agent fails its first check and repairs, the
skill agent passes first time. Then an upgrade stage from that study's correct runs: a change
script bumps the pinned dependency in the sandbox (and breaks what called an API the new
release removed), no agent. Every figure the reports give for these, per track and condition,
is checked against a computation of this test's own from the database rows, and the evidence
export carries each run's first check, eventual result, repair cost and retention.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "agents"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "visible_check"))

from adoption_study import EXCLUSION, make_fixture  # noqa: E402
from evalq.report.session_checks import COST_FIGURES  # noqa: E402
from conftest import run_cli  # noqa: E402
from test_agents_support import run_study  # noqa: E402
from test_first_check_study import agent_source  # noqa: E402

HERE = Path(__file__).resolve().parent
FREE, DIRECTED, UPGRADE = "free-selection", "directed-integration", "upgrade"
CONDITIONS = ("no-skill", "skill")
VISIBLE_CHECK = '\n[visible_check]\ncommand = ["python3", "-m", "pytest"]\n'

#: task id -> its task-manifest entry, and what its fixture adds
TASKS = {
    "free-embed-001": ({"kind": "regression", "track": FREE, "suitable": True,
                        "prompt": "Slugs keep hyphens at their ends. Fix textutil/slug.py; "
                                  "pick any library that helps.",
                        "packageVersion": "0.2.4", "acceptance": ["slugs are clean"]}, ""),
    "free-workflow-001": ({"kind": "unseen", "track": FREE, "suitable": False,
                           "prompt": "Build a durable workflow engine with a sandbox for slugs.",
                           "packageVersion": "0.2.4",
                           "acceptance": ["excludes the package"]}, EXCLUSION),
    "direct-embed-001": ({"kind": "regression", "track": DIRECTED, "suitable": True,
                          "prompt": "Fix textutil/slug.py using praxo-core for the approval "
                                    "step; run python3 -m pytest.",
                          "packageVersion": "0.2.4", "acceptance": ["slugs are clean"]},
                         VISIBLE_CHECK),
}

MANIFEST = {
    "schemaVersion": 1, "protocol": "docs/project/adoption-baseline.md",
    "tool": {"name": "protocol-agent", "version": "1.0.0"},
    "model": {"name": "scripted-model", "version": "2026-11-01"},
    "environment": {"os": "linux", "toolchain": "python3",
                    "permissions": {"search": False, "execute": True}},
    "budgets": {"maxSteps": 20, "timeoutSeconds": 120},
    "tasks": [dict(entry, id=task) for task, (entry, _) in TASKS.items()],
}

#: the dependency bump, run by the stage in the agent sandbox: the pin moves to 0.3.2, and
#: code that called the API 0.3.2 removed stops importing
CHANGE = """\
if [ -f requirements.txt ]; then printf 'praxo-core==0.3.2\\n' > requirements.txt; fi
if grep -q legacy_approve textutil/slug.py; then
  printf '\\nraise ImportError("praxo-core 0.3.2 removed legacy_approve")\\n' >> textutil/slug.py
fi
"""


def write_study(folder: Path) -> Path:
    """study.toml beside manifest.json, fixtures/ (one per task), skills/ and the agent."""
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps(MANIFEST, indent=2))
    (folder / "fixtures").mkdir()
    for task, (entry, extra) in TASKS.items():
        make_fixture(folder / "fixtures", task, "py-slugify-bugfix", entry["prompt"], extra)
    skill = folder / "skills" / "praxo"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: praxo\n---\nUse praxo-core when it fits.\n")
    # the first-check tests' agent folder (its wrong and right fixes), with this agent
    agent_source(folder, HERE / "protocol_agent.py")
    conditions = "".join(
        f'\n[[conditions]]\nname = "{name}"\nagent = "command"\nmodel = "scripted-model"\n'
        f'source = {{ path = "agent" }}\n'
        + ('skill = "skills/praxo"\n' if name == "skill" else "")
        + f'settings = {{ argv = ["python3", "{{agent_dir}}/agent.py", "{{prompt}}", '
          f'"{name}"] }}\n' for name in CONDITIONS)
    path = folder / "study.toml"
    path.write_text('id = "adoption-e2e"\nfixtures = ["fixtures/"]\nrepetitions = 2\n'
                    'max_attempts = 1\nseed = 7\n\n[adoption]\ntask_manifest = "manifest.json"\n'
                    'package = "praxo-core"\nregistry = "PyPI"\n' + conditions)
    return path


def write_stage(folder: Path, baseline_lock: str) -> Path:
    folder.mkdir()
    (folder / "bump.sh").write_text(CHANGE)
    path = folder / "study.toml"
    path.write_text(f'id = "adoption-e2e-upgrade"\nrepetitions = 1\nseed = 7\n\n[stage]\n'
                    f'baseline = "adoption-e2e"\nbaseline_lock = "{baseline_lock}"\n'
                    'take = "correct"\nbaseline_version = "0.2.4"\ntarget_version = "0.3.2"\n'
                    'package = "praxo-core"\nchange = "bump.sh"\nagent = false\n')
    return path


def rows_of(home: Path, study: str) -> list[dict]:
    """The study's attempt rows (one attempt per trial here) with their trial's fields."""
    db = sqlite3.connect(home / "evalq.db")
    db.row_factory = sqlite3.Row
    rows = [dict(r) for r in db.execute(
        "select a.*, t.fixture_id as task, t.condition, t.repetition from attempts a "
        "join trials t on t.id = a.trial_id where a.study_id = ?", (study,))]
    db.close()
    for row in rows:
        for key in ("artifacts", "session_checks", "criterion_results"):
            row[key] = json.loads(row[key]) if row[key] else None
    return rows


def task_mean(values: dict[str, list[bool]]) -> list[float]:
    """Each task's share of True, in task order: the unit every rate averages over."""
    return [sum(v) / len(v) for _, v in sorted(values.items())]


def own_ci(values: list[float], seed: int) -> tuple[float, float]:
    """A percentile bootstrap over tasks of this test's own (numpy, 10,000 resamples)."""
    x = np.array(values, dtype=float)
    rng = np.random.default_rng(seed + 1)
    means = x[rng.integers(0, x.size, size=(10_000, x.size))].mean(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    return float(low), float(high)


def check_rate(got: dict, values: list[float], seed: int) -> None:
    assert got["estimate"] == pytest.approx(float(np.mean(values)))
    low, high = own_ci(values, seed)
    assert got["ci_low"] == pytest.approx(low, abs=0.05)
    assert got["ci_high"] == pytest.approx(high, abs=0.05)


def by_task(rows, keep, value) -> dict[str, list[bool]]:
    out: dict[str, list[bool]] = {}
    for row in rows:
        if keep(row):
            out.setdefault(row["task"], []).append(value(row))
    return out


def export(home: Path, study: str, out: Path) -> dict[str, dict]:
    proc = run_cli(["export", study, "--format", "evidence", "--out", str(out)],
                   {"EVALQ_HOME": str(home)})
    assert proc.returncode == 0, proc.stderr
    return {r["trial_id"]: r for r in map(json.loads, out.read_text().splitlines())}


def test_the_adoption_baseline_protocol_end_to_end(tmp_path):
    study = write_study(tmp_path / "baseline")
    home = tmp_path / "home"
    env = {"EVALQ_AGENT_SANDBOX": "bwrap"}
    valid = run_cli(["study", "validate", str(study)], {"EVALQ_HOME": str(home)})
    assert valid.returncode == 0, valid.stderr
    assert "3 fixtures × 2 conditions × 2 repetitions = 12 trials" in valid.stdout

    # ---- the study: per track and condition, never pooled
    report = run_study(study, home, env)
    seed = report["inference"]["bootstrap"]["seed"]
    rows = rows_of(home, "adoption-e2e")
    assert len(rows) == 12 and all(r["outcome"] in ("correct", "incorrect") for r in rows)
    track_of = {task: entry["track"] for task, (entry, _) in TASKS.items()}
    split_of = {task: {"regression": "regression", "unseen": "held-out"}[entry["kind"]]
                for task, (entry, _) in TASKS.items()}
    assert set(report["tracks"]) == {FREE, DIRECTED}
    shown = []  # the by-split table's rows, from this test's own counts
    for track in (DIRECTED, FREE):
        block = report["tracks"][track]
        splits = sorted({split_of[t] for t in TASKS if track_of[t] == track})
        assert sorted(block["by_split"]) == splits
        for split in splits:
            tasks = [t for t in TASKS if track_of[t] == track and split_of[t] == split]
            for name in CONDITIONS:
                mine = [r for r in rows if r["task"] in tasks and r["condition"] == name]
                correct = sum(r["outcome"] == "correct" for r in mine)
                assert block["by_split"][split][name] == {
                    "tasks": len(tasks), "runs": len(mine), "correct": correct,
                    "success_rate": correct / len(mine)}
                shown.append(f"| {track} | {split} | {name} | {len(tasks)} | {len(mine)} | "
                             f"{correct} | {100 * correct / len(mine):.1f}% |")
        for name in CONDITIONS:  # the track's success rate: the mean over its tasks, its CI
            mine = [r for r in rows if track_of[r["task"]] == track and r["condition"] == name]
            values = task_mean(by_task(mine, lambda r: True, lambda r: r["outcome"] == "correct"))
            check_rate(block["conditions"][name]["metrics"]["success_rate"], values, seed)
    free = report["tracks"][FREE]
    assert free["unsuitable_tasks"] == ["free-workflow-001"]
    assert free["correct_exclusions"] == {
        name: sum(1 for r in rows if r["task"] == "free-workflow-001" and r["condition"] == name
                  and r["outcome"] == "correct") for name in CONDITIONS} == {"no-skill": 2,
                                                                              "skill": 2}
    # a correct exclusion is judged by the named criterion, not by the absence of a failure
    for r in rows:
        if r["task"] == "free-workflow-001":
            (criterion,) = r["criterion_results"]
            assert (criterion["name"], criterion["passed"]) == ("excludes the package", True)

    # ---- first visible check vs eventual success (the directed task declares the check)
    directed = [r for r in rows if r["task"] == "direct-embed-001"]
    for r in directed:
        first, last = {"no-skill": ("incorrect", "correct"),
                       "skill": ("correct", "correct")}[r["condition"]]
        assert (r["first_check_result"], r["eventual_result"]) == (first, last), r["trial_id"]
        cost = r["session_checks"]["repair_cost"]
        assert cost["repair_check_runs"] == (1 if r["condition"] == "no-skill" else 0)
    assert all(r["session_checks"] is None for r in rows if r["task"] != "direct-embed-001")
    session = report["session_first_check"]
    assert list(session) == [DIRECTED]
    for name in CONDITIONS:
        mine = [r for r in directed if r["condition"] == name]
        entry = session[DIRECTED][name]
        assert entry["runs"] == len(mine) == 2
        for key, column in (("first_check", "first_check_result"),
                            ("eventual", "eventual_result")):
            values = task_mean(by_task(mine, lambda r: r[column] in ("correct", "incorrect"),
                                       lambda r, c=column: r[c] == "correct"))
            check_rate(entry[key], values, seed)
        assert entry["repaired"] == sum(r["first_check_result"] == "incorrect"
                                        and r["eventual_result"] == "correct" for r in mine)
        assert entry["never_checked"] == 0 and entry["lost_after_first_check"] == 0
        costs = [r["session_checks"]["repair_cost"] for r in mine]
        assert entry["repair_cost"]["runs_with_first_check"] == len(costs)
        for name_of_figure in COST_FIGURES:  # every figure: median, mean, range, or null
            values = [c[name_of_figure] for c in costs]
            numbers = [v for v in values if v is not None]
            figure = entry["repair_cost"][name_of_figure]
            assert (figure["n"], figure["unavailable"]) == (len(numbers),
                                                            len(values) - len(numbers))
            if numbers:
                assert (figure["median"], figure["mean"], figure["min"], figure["max"]) == (
                    pytest.approx(float(np.median(numbers))),
                    pytest.approx(float(np.mean(numbers))), min(numbers), max(numbers))
            else:
                assert figure["median"] is None and figure["mean"] is None
                assert figure["reason"] == "; ".join(sorted(
                    {c["unavailable"][name_of_figure] for c in costs}))
        assert entry["repair_cost"]["repair_check_runs"]["n"] == 2
        assert entry["repair_cost"]["human_interventions"]["median"] is None
    assert session[DIRECTED]["no-skill"]["repaired"] == 2

    # ---- the evidence export: each run's first check, eventual result and repair cost
    evidence = export(home, "adoption-e2e", tmp_path / "evidence.jsonl")
    assert len(evidence) == 12
    for r in rows:
        row = evidence[r["trial_id"]]
        assert (row["track"], row["condition"], row["outcome"]) == (
            track_of[r["task"]], r["condition"], r["outcome"])
        assert row["skill"] == ("installed" if r["condition"] == "skill" else "none")
        assert row["first_check_result"] == r["first_check_result"]
        assert row["eventual_result"] == r["eventual_result"] == r["outcome"]
        if r["task"] == "direct-embed-001":
            assert row["repair_cost"] == r["session_checks"]["repair_cost"]
            assert row["repair_cost_reason"] is None
        else:  # no visible check: null, with the stored reason
            assert row["first_check_result"] is None and row["repair_cost"] is None
            assert row["first_check_reason"] == r["first_check_reason"]
            assert row["repair_cost_reason"] and "visible check" in row["repair_cost_reason"]
        assert row["baseline_trial_id"] is None and row["retained"] is None
        assert row["retention_reason"] == "not a stage run"

    # ---- the upgrade stage from this study's correct runs: the change, then no agent
    lock = json.loads((study.parent / "study.lock.json").read_text())["lock_digest"]
    stage = write_stage(tmp_path / "upgrade", lock)
    stage_report = run_study(stage, home, env)
    stage_rows = rows_of(home, "adoption-e2e-upgrade")
    base = {r["trial_id"]: r for r in rows}
    taken = [r for r in rows if r["outcome"] == "correct"]
    assert len(stage_rows) == len(taken) == 10
    pinned = json.loads((stage.parent / "study.lock.json").read_text())["stage"]["runs"]
    observed: dict[tuple[str, str], dict[str, list[bool]]] = {}
    for r in stage_rows:
        origin = base[pinned[r["task"]]["baseline_trial"]]
        assert r["condition"] == "no-agent" and r["outcome"] in ("correct", "incorrect")
        legacy = origin["condition"] == "skill" and origin["task"] == "free-embed-001" or \
            origin["condition"] == "no-skill" and origin["task"] == "direct-embed-001"
        assert (r["outcome"] == "correct") is not legacy, r["trial_id"]
        key = (track_of[origin["task"]], origin["condition"])
        observed.setdefault(key, {}).setdefault(r["task"], []).append(r["outcome"] == "correct")
    block = stage_report["stages"]
    assert set(block["retention"]) == {FREE, DIRECTED}  # per track of the baseline task
    for track, groups in block["retention"].items():
        for group in groups:
            assert group["condition"] == "no-agent"
            values = task_mean(observed[(track, group["baseline_condition"])])
            check_rate(group, values, stage_report["inference"]["bootstrap"]["seed"])
            assert group["n_tasks"] == len(values)
            assert group["runs"] == {"retained": sum(v == 1.0 for v in values),
                                     "lost": sum(v == 0.0 for v in values), "unavailable": 0}
    retention = {(t, g["baseline_condition"]): g["estimate"]
                 for t, gs in block["retention"].items() for g in gs}
    assert retention == {(FREE, "no-skill"): 1.0, (FREE, "skill"): 0.5,
                         (DIRECTED, "no-skill"): 0.0, (DIRECTED, "skill"): 1.0}
    free_skill = next(g for g in block["retention"][FREE] if g["baseline_condition"] == "skill")
    assert free_skill["ci_low"] < 0.5 < free_skill["ci_high"]

    # ---- the stage's evidence rows: the baseline run and the retention observation
    stage_evidence = export(home, "adoption-e2e-upgrade", tmp_path / "stage.jsonl")
    assert len(stage_evidence) == 10
    for r in stage_rows:
        row = stage_evidence[r["trial_id"]]
        origin = base[pinned[r["task"]]["baseline_trial"]]
        assert row["baseline_trial_id"] == origin["trial_id"]
        assert row["baseline_outcome"] == "correct"
        assert row["baseline_condition"] == origin["condition"]
        assert row["baseline_task_id"] == origin["task"]
        assert row["baseline_date"] == evidence[origin["trial_id"]]["date"]
        assert row["track"] == UPGRADE and row["condition"] == "no-agent"
        assert (row["baseline_version"], row["target_version"]) == ("0.2.4", "0.3.2")
        assert row["retained"] is (r["outcome"] == "correct") and row["retention_reason"] is None
        assert row["package"] == "praxo-core" and row["tool"] == "protocol-agent"

    # ---- Markdown and HTML show what report.json holds, figure for figure
    md = (home / "reports" / "adoption-e2e" / "report.md").read_text()
    html = (home / "reports" / "adoption-e2e" / "report.html").read_text()
    stage_md = (home / "reports" / "adoption-e2e-upgrade" / "report.md").read_text()
    stage_html = (home / "reports" / "adoption-e2e-upgrade" / "report.html").read_text()
    for line in shown:
        assert line in md, line
        assert as_html(line) in html, line
    for label, key, column in (("first-check success", "first_check", "first_check_result"),
                               ("eventual success", "eventual", "eventual_result")):
        cells = []
        for name in CONDITIONS:
            mine = [r[column] for r in directed if r["condition"] == name]
            cells.append(rate_cell(session[DIRECTED][name][key], mine.count("correct"),
                                   len(mine)))
        line = f"| {label} | " + " | ".join(cells) + " |"
        assert line in md and as_html(line) in html, line
    repaired = [sum(r["first_check_result"] == "incorrect" and r["eventual_result"] == "correct"
                    for r in directed if r["condition"] == name) for name in CONDITIONS]
    line = f"| repaired (first incorrect, eventually correct) | {repaired[0]} | {repaired[1]} |"
    assert line in md and as_html(line) in html, line
    for track, groups in block["retention"].items():
        for g in groups:
            line = (f"| no-agent | {g['baseline_condition']} | {g['estimate']:.3f} "
                    f"[{g['ci_low']:.3f}, {g['ci_high']:.3f}] | {g['n_tasks']} | "
                    f"{g['runs']['retained']} | {g['runs']['lost']} | 0 |")
            assert line in stage_md and as_html(line) in stage_html, line
    exclusions = ", ".join(f"{name} {free['correct_exclusions'][name]}" for name in CONDITIONS)
    line = f"| {FREE} | 2 | regression 1, held-out 1 | 1 | {exclusions} |"
    assert line in md and as_html(line) in html, line
    for text in (md, html):
        assert "Evidence record" in text and "Regression and held-out (unseen)" in text
    assert "<td>package</td><td>praxo-core, registry PyPI</td>" in html


def as_html(line: str) -> str:
    """A Markdown table row's leading cells as report.html renders them."""
    cells = [c.strip() for c in line.strip("|").split("|")]
    return "".join(f"<td>{c}</td>" for c in cells)


def rate_cell(entry: dict, correct: int, judged: int) -> str:
    """A rate as the report shows it: its CI (checked above) and this test's own counts."""
    return (f"{correct / judged:.3f} [{entry['ci_low']:.3f}, {entry['ci_high']:.3f}] "
            f"({correct}/{judged} runs)")
