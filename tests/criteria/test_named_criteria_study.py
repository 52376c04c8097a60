"""A real study on the embedded default whose fixtures declare named criteria.

Two copies of the slug task in two tracks, each with a required group of hidden checks, a
group that is not required, a required trace criterion ("edited the code"), one that is not
("loaded the skill") and a review criterion. Four scripted conditions: the correct solution,
the incorrect one (it fails only the group that is not required, so it is `correct`), doing
nothing (fails both required criteria) and the incorrect one with a skill it loads. The
report's per-criterion rates are checked against a computation of their own from the rows the
database holds, per track (never pooled), and `show` and `status` name every criterion.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from conftest import run_cli  # noqa: E402
from criteria_study import write_criteria_study  # noqa: E402

REPS = 2
EXPECTED_OUTCOME = {"good": "correct", "bad": "correct", "idle": "incorrect", "skilled": "correct"}
#: criterion -> condition -> met in every run
EXPECTED_MET = {
    "basic slugs": {"good": True, "bad": True, "idle": False, "skilled": True},
    "no hyphen at the ends": {"good": True, "bad": False, "idle": False, "skilled": False},
    "edited the code": {"good": True, "bad": True, "idle": False, "skilled": True},
    "loaded the skill": {"good": False, "bad": False, "idle": False, "skilled": True},
}


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = tmp_path_factory.mktemp("named")
    manifest = write_criteria_study(root / "s", repetitions=REPS)
    home = root / "home"
    proc = run_cli(["run", str(manifest)], {"EVALQ_HOME": str(home)}, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:] + proc.stdout[-2000:]
    folder = home / "reports" / "named"
    return home, json.loads((folder / "report.json").read_text()), folder


def _rows(home: Path) -> list[dict]:
    db = sqlite3.connect(home / "evalq.db")
    rows = db.execute("select t.fixture_id, t.condition, a.outcome, a.reason, "
                      "a.criterion_results from attempts a join trials t on t.id = a.trial_id"
                      ).fetchall()
    db.close()
    return [{"task": r[0], "condition": r[1], "outcome": r[2], "reason": r[3],
             "results": json.loads(r[4]) if r[4] else None} for r in rows]


def test_outcomes_come_from_the_required_criteria(study):
    home, report, _ = study
    rows = _rows(home)
    assert len(rows) == 2 * 4 * REPS
    for row in rows:
        assert row["outcome"] == EXPECTED_OUTCOME[row["condition"]], row
        by_name = {r["name"]: r for r in row["results"]}
        assert list(by_name) == ["basic slugs", "no hyphen at the ends", "edited the code",
                                 "loaded the skill", "reviewers accept it"]
        for name, met in EXPECTED_MET.items():
            assert by_name[name]["passed"] is met[row["condition"]], (name, row)
        review = by_name["reviewers accept it"]
        assert review["passed"] is None and review["evidence"] == "not rated yet"
    bad = next(r for r in rows if r["condition"] == "bad")
    assert "failed but not required: no hyphen at the ends" in bad["reason"]
    idle = next(r for r in rows if r["condition"] == "idle")
    assert "required criteria not met: basic slugs" in idle["reason"]
    assert "edited the code" in idle["reason"]
    hidden = {r["name"]: r for r in bad["results"]}["no hyphen at the ends"]
    assert any("test_strips_leading_and_trailing_separators" in c for c in hidden["checks"])
    assert "3 of 4 check(s) failed" in hidden["evidence"]
    skill = {r["name"]: r for r in next(r for r in rows if r["condition"] == "skilled")
             ["results"]}["loaded the skill"]
    assert skill["steps"], "the trace steps that met the rule are the evidence"
    for name in ("good", "bad", "idle", "skilled"):
        assert report["conditions"][name]["outcomes"][EXPECTED_OUTCOME[name]] == 2 * REPS


def _bootstrap(values: list[float], seed: int, n_resamples: int) -> tuple[float, float]:
    """Percentile bootstrap over tasks, one resample at a time (numpy's generator, as the
    report states its seed)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    means = []
    n = len(values)
    for _ in range(n_resamples):
        idx = rng.integers(0, n, size=n)
        means.append(sum(values[i] for i in idx) / n)
    means.sort()
    return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def test_rates_per_criterion_condition_and_track_match_a_computation_of_their_own(study):
    home, report, _ = study
    rows = _rows(home)
    track_of = {"slug-directed": "directed-integration", "slug-free": "free-selection"}
    block = report["criteria"]
    assert set(block) == set(track_of.values()), "one block per track, none pooled"
    n_resamples = report["inference"]["bootstrap"]["n_resamples"]
    for track in block:
        for name, entry in block[track].items():
            for condition, rate in entry["conditions"].items():
                tasks: dict[str, list] = {}
                for row in rows:
                    if track_of[row["task"]] != track or row["condition"] != condition:
                        continue
                    result = next(r for r in row["results"] if r["name"] == name)
                    tasks.setdefault(row["task"], []).append(result["passed"])
                judged = [v for vs in tasks.values() for v in vs if v is not None]
                assert rate["runs"] == {"passed": judged.count(True),
                                        "failed": judged.count(False),
                                        "unresolved": sum(v is None for vs in tasks.values()
                                                          for v in vs)}
                per_task = [sum(v for v in vs if v is not None) /
                            len([v for v in vs if v is not None])
                            for vs in tasks.values() if any(v is not None for v in vs)]
                if not per_task:
                    assert rate["estimate"] is None and rate["reason"]
                    continue
                assert rate["estimate"] == pytest.approx(sum(per_task) / len(per_task))
                low, high = _bootstrap(per_task, report["study"]["seed"], n_resamples)
                assert (rate["ci_low"], rate["ci_high"]) == pytest.approx((low, high))
    directed = block["directed-integration"]
    assert directed["loaded the skill"]["conditions"]["skilled"]["estimate"] == 1.0
    assert directed["no hyphen at the ends"]["required"] is False
    assert directed["reviewers accept it"]["kind"] == "review"


def test_markdown_html_show_and_status_name_the_criteria(study):
    home, report, folder = study
    markdown = (folder / "report.md").read_text()
    assert "## Named criteria" in markdown and "### Track free-selection" in markdown
    assert "| loaded the skill | trace | no |" in markdown
    html = (folder / "report.html").read_text()
    assert "Named criteria" in html and "loaded the skill" in html
    idle_page = next(p for p in (folder / "transcripts").glob("*idle*"))
    page = idle_page.read_text()
    assert "named criteria: 0 of 5 met" in page
    assert "edited the code [trace, required]: not met" in page
    trial = next(r["trial_id"] for r in report["trial_rows"] if r["condition"] == "idle")
    shown = run_cli(["show", trial, "--json"], {"EVALQ_HOME": str(home)})
    assert shown.returncode == 0, shown.stderr
    criteria = json.loads(shown.stdout)["criteria"]
    assert {c["name"]: c["passed"] for c in criteria}["edited the code"] is False
    text = run_cli(["show", trial], {"EVALQ_HOME": str(home)})
    assert "edited the code [trace, required]: not met" in text.stdout
    status = run_cli(["status", "named"], {"EVALQ_HOME": str(home)})
    assert status.returncode == 0, status.stderr
    assert f"loaded the skill: bad 0/{2 * REPS}" in status.stdout
    assert f"skilled {2 * REPS}/{2 * REPS}" in status.stdout
    assert "reviewers accept it:" in status.stdout and "unresolved" in status.stdout


def test_the_per_trial_export_carries_each_criterion(study, tmp_path):
    home, _, _ = study
    out = tmp_path / "trials.jsonl"
    proc = run_cli(["export", "named", "--format", "jsonl", "--out", str(out)],
                   {"EVALQ_HOME": str(home)})
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 2 * 4 * REPS
    for row in rows:
        assert [c["index"] for c in row["criteria"]] == [0, 1, 2, 3, 4]
        named = {c["name"]: c["passed"] for c in row["criteria"]}
        for name, met in EXPECTED_MET.items():
            assert named[name] is met[row["condition"]]
        assert named["reviewers accept it"] is None


def test_a_study_without_named_criteria_reports_none(tmp_path, fixture_copies):
    from conftest import write_study

    manifest = write_study(tmp_path / "plain", fixture_copies, repetitions=1)
    home = tmp_path / "home"
    proc = run_cli(["run", str(manifest)], {"EVALQ_HOME": str(home)}, timeout=600)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(next((home / "reports").glob("*/report.json")).read_text())
    assert report["criteria"] == {}
    db = sqlite3.connect(home / "evalq.db")
    assert db.execute("select count(*) from attempts where criterion_results is not null"
                      ).fetchone() == (0,)
    assert {o for (o,) in db.execute("select outcome from attempts")} == {"correct", "incorrect"}


def test_the_same_study_on_postgresql(tmp_path, postgres_url):
    """The embedded default with PostgreSQL as its database: the same results per criterion."""
    from sqlalchemy import text

    from evalq.results.store import get_engine

    manifest = write_criteria_study(tmp_path / "s", repetitions=1)
    home = tmp_path / "home"
    proc = run_cli(["run", str(manifest)], {"EVALQ_HOME": str(home),
                                            "EVALQ_DATABASE_URL": postgres_url}, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:] + proc.stdout[-2000:]
    with get_engine(postgres_url).connect() as conn:
        rows = conn.execute(text("select t.condition, a.outcome, a.criterion_results from "
                                 "attempts a join trials t on t.id = a.trial_id")).all()
    assert len(rows) == 2 * 4
    for condition, outcome, results in rows:
        assert outcome == EXPECTED_OUTCOME[condition]
        named = {r["name"]: r["passed"] for r in results}
        assert {n: named[n] for n in EXPECTED_MET} == {n: m[condition]
                                                     for n, m in EXPECTED_MET.items()}
    report = json.loads((home / "reports" / "named" / "report.json").read_text())
    for track in ("directed-integration", "free-selection"):
        rates = report["criteria"][track]["loaded the skill"]["conditions"]
        assert {c: r["estimate"] for c, r in rates.items()} == {
            "good": 0.0, "bad": 0.0, "idle": 0.0, "skilled": 1.0}
