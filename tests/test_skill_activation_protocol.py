"""The skill-activation protocol end to end: an activation case and an unrelated case, run with
no skill, with two revisions of the skill and on a second model, by scripted agents on the
embedded default; every activation figure and latency summary is recomputed here from the
exported per-trial rows and the stored attempts, by plain counting."""

from __future__ import annotations

import json
import random
import re
from collections import defaultdict

import pytest
from conftest import copy_fixture, run_cli

from evalq.analysis.trial_import import import_trials
from evalq.fixtures.fixture import freeze_fixture
from evalq.report.compute import compute_report
from evalq.results.store import get_engine, init_db

ACTIVATION, UNRELATED = "py-slugify-bugfix", "py-inventory-feature"


def _declare(fixture, expected: bool) -> None:
    toml = fixture / "fixture.toml"
    text = toml.read_text()
    toml.write_text(re.sub(r"^\[tool_policy\]", f"skill_expected = {str(expected).lower()}\n\n"
                           "[tool_policy]", text, count=1, flags=re.MULTILINE))
    freeze_fixture(fixture)


def _study(tmp_path):
    root = tmp_path / "fixtures"
    root.mkdir()
    _declare(copy_fixture(ACTIVATION, root), True)
    _declare(copy_fixture(UNRELATED, root), False)
    study = tmp_path / "study"
    for revision, text in (("v1", "Keep functions small."), ("v2", "Name things well.")):
        skill = study / "skills" / revision / "tidy-code"
        skill.mkdir(parents=True)
        (skill / "SKILL.md").write_text(f"---\nname: tidy-code\n---\n{text}\n")
    loaded = 'settings = { action = "solution", solution = "correct", load_skill = true }'
    unused = 'settings = { action = "solution", solution = "correct" }'
    (study / "study.toml").write_text(f'''
id = "activation"
fixtures = ["{(root / ACTIVATION).as_posix()}", "{(root / UNRELATED).as_posix()}"]
repetitions = 2
seed = 3

[budgets]
wall_seconds = 120

[[conditions]]
name = "no-skill"
model = "model-a"
{unused}

[[conditions]]
name = "skill-v1"
model = "model-a"
skill = "skills/v1/tidy-code"
{loaded}

[[conditions]]
name = "skill-v2"
model = "model-a"
skill = "skills/v2/tidy-code"
{unused}

[[conditions]]
name = "skill-v1-b"
model = "model-b"
skill = "skills/v1/tidy-code"
{loaded}

[[hypotheses]]
id = "H1"
metric = "tpr"
baseline = "skill-v1"
candidate = "skill-v2"
''')
    return study / "study.toml"


def _expected_figures(rows):
    """Per (model, case, condition) from the exported rows: loads, misses, false positives."""
    cells = defaultdict(list)
    for row in rows:
        cells[row["model"], row["case_id"], row["condition"]].append(row)
    out = {}
    for key, group in cells.items():
        has_skill = group[0]["skill_commit"] is not None
        should = group[0]["skill_expected"] if has_skill else False
        loaded = len([r for r in group if r["skill_loaded"] is True])
        not_loaded = len([r for r in group if r["skill_loaded"] is False])
        known = loaded + not_loaded
        times = sorted(r["elapsed_seconds"] for r in group)
        middle = len(times) // 2
        out[key] = {"loaded": loaded, "not_loaded": not_loaded,
                    "misses": not_loaded if should is True and known else None,
                    "false_positives": loaded if should is False and known else None,
                    "median": (times[middle] if len(times) % 2 else
                               (times[middle - 1] + times[middle]) / 2),
                    "min": times[0], "max": times[-1]}
    return out


def test_activation_and_unrelated_cases_with_and_without_the_skill(tmp_path):
    manifest = _study(tmp_path)
    env = {"EVALQ_HOME": str(tmp_path / "home")}
    proc = run_cli(["run", str(manifest)], env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    report_path = next(line.split(": ", 1)[1] for line in proc.stdout.splitlines()
                       if line.startswith("report: ") and line.endswith(".json"))
    report = json.loads(open(report_path).read())
    exported = tmp_path / "trials.jsonl"
    assert run_cli(["export", "activation", "--format", "jsonl", "--out", str(exported)],
                   env).returncode == 0
    rows = [json.loads(line) for line in exported.read_text().splitlines()]
    assert len(rows) == 16

    # skill_commit is the skill's own revision: the frozen folder's digest, one per revision
    lock = json.loads((manifest.parent / "study.lock.json").read_text())
    commits = {r["condition"]: r["skill_commit"] for r in rows}
    assert commits["no-skill"] is None
    assert commits["skill-v1"] == commits["skill-v1-b"] == lock["skills"]["skill-v1"]["digest"]
    assert commits["skill-v2"] == lock["skills"]["skill-v2"]["digest"] != commits["skill-v1"]

    block = report["skill_activation"]
    # per model, never pooled: model-b's condition is reported under model-b alone
    assert sorted(block["models"]) == ["model-a", "model-b"]
    assert sorted(block["models"]["model-b"]["conditions"]) == ["skill-v1-b"]
    assert sorted(block["models"]["model-a"]["conditions"]) == ["no-skill", "skill-v1",
                                                                 "skill-v2"]
    expected = _expected_figures(rows)
    for model, part in block["models"].items():
        for case, entry in part["cases"].items():
            assert entry["skill_expected"] is (case == ACTIVATION)
            for name, cell in entry["conditions"].items():
                want = expected[model, case, name]
                got = {"loaded": cell["loaded"], "not_loaded": cell["not_loaded"],
                       "misses": cell["misses"], "false_positives": cell["false_positives"],
                       "median": cell["latency_seconds"]["median"],
                       "min": cell["latency_seconds"]["min"],
                       "max": cell["latency_seconds"]["max"]}
                assert got == want, (model, case, name)
    a = block["models"]["model-a"]["cases"]
    # the class that went uncounted: a skill loaded on the unrelated case, in a condition that
    # has the skill, is a false positive (it used to read None)
    assert a[UNRELATED]["conditions"]["skill-v1"]["false_positives"] == 2
    assert a[ACTIVATION]["conditions"]["skill-v1"]["misses"] == 0
    assert a[ACTIVATION]["conditions"]["skill-v2"]["misses"] == 2
    assert a[UNRELATED]["conditions"]["skill-v2"]["false_positives"] == 0
    # the scripted agent's trace cannot show a load without a skill: unknown, never 0
    assert a[UNRELATED]["conditions"]["no-skill"]["false_positives"] is None
    totals = report["conditions"]["skill-v1"]["skill_activation"]
    assert (totals["misses"], totals["miss_runs"], totals["false_positives"],
            totals["false_positive_runs"]) == (0, 2, 2, 2)
    assert report["conditions"]["skill-v2"]["skill_activation"]["misses"] == 2

    # the two revisions are compared as two conditions, paired per task
    pairs = {(c["baseline"], c["candidate"]) for c in report["comparisons"]}
    assert ("skill-v1", "skill-v2") in pairs

    markdown = open(report_path[:-len(".json")] + ".md").read()
    assert "## Skill activation" in markdown and "### Model model-b" in markdown
    assert "should not activate" in markdown

    # the exported rows import back (the row format of the protocol), one model per study
    mixed = run_cli(["import", str(exported), "--study", "mixed", "--format", "trials"], env)
    refused = mixed.stderr.strip().splitlines()
    assert mixed.returncode == 2 and len(refused) == sum(r["model"] == "model-b" for r in rows)
    assert all("field 'model'" in line and "never pooled" in line for line in refused)
    model_a = tmp_path / "model-a.jsonl"
    model_a.write_text("".join(json.dumps(r) + "\n" for r in rows if r["model"] == "model-a"))
    proc = run_cli(["import", str(model_a), "--study", "imported-a", "--format", "trials"], env)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "imported.json"
    assert run_cli(["report", "imported-a", "--format", "json", "--out", str(out)],
                   env).returncode == 0
    imported = json.loads(out.read_text())["skill_activation"]["models"]
    assert list(imported) == ["model-a"]
    for case, entry in imported["model-a"]["cases"].items():
        for name, cell in entry["conditions"].items():
            native = block["models"]["model-a"]["cases"][case]["conditions"][name]
            assert {k: cell[k] for k in ("loaded", "not_loaded", "misses", "false_positives",
                                         "latency_seconds")} == \
                {k: native[k] for k in ("loaded", "not_loaded", "misses", "false_positives",
                                        "latency_seconds")}, (case, name)
    assert imported["model-a"]["conditions"]["skill-v2"]["skill_commit"] == commits["skill-v2"]


def test_bad_trial_rows_are_one_line_each(tmp_path):
    good = {"case_id": "stdlib_refactor", "condition": "with_skill", "skill_commit": "abc",
            "model": "m-1", "runtime": "cli 1.0", "trial": 1, "skill_loaded": True,
            "criteria": [{"index": 0, "passed": True, "evidence": "out.log: ok"}],
            "elapsed_seconds": 12.5, "input_tokens": None, "output_tokens": None,
            "artifacts": "/tmp/run-1"}
    rows = [good, {k: v for k, v in good.items() if k != "skill_loaded"} | {"trial": 2},
            dict(good, trial=3, criteria=[{"index": 0, "passed": "yes"}]),
            dict(good, trial=4, skill_commit="def")]
    path = tmp_path / "trials.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = {"EVALQ_DATABASE_URL": f"sqlite:///{tmp_path}/t.db", "EVALQ_HOME": str(tmp_path)}
    proc = run_cli(["import", str(path), "--study", "t", "--format", "trials"], env)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 3, proc.stderr
    assert "line 2" in lines[0] and "'skill_loaded'" in lines[0] and str(path) in lines[0]
    assert "line 3" in lines[1] and "criteria.0" in lines[1]
    assert "line 4" in lines[2] and "skill_commit" in lines[2] and "condition of its own" in lines[2]
    path.write_text(json.dumps(good) + "\n")
    proc = run_cli(["import", str(path), "--study", "t", "--format", "trials"], env)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'trials.db'}"
    else:
        yield request.getfixturevalue("postgres_url")
    get_engine.cache_clear()


def _trial_rows(seed: int = 11) -> list[dict]:
    """Three cases (activation, unrelated, undeclared) x three conditions x 3 trials, with
    loads, misses, unknown traces, unresolved criteria and missing elapsed times."""
    rng = random.Random(seed)
    expected = {"indirect_context_activation": True, "unrelated_cli": False, "wrapper_api": None}
    rows = []
    for case, should in expected.items():
        for cond, commit in (("without_skill", None), ("skill_old", "1111aaa"),
                             ("skill_new", "2222bbb")):
            for trial in range(1, 4):
                loaded = rng.choice([True, False, None]) if commit else \
                    rng.choice([False, False, True])
                rows.append({"case_id": case, "condition": cond, "skill_commit": commit,
                             "model": "exact-model-1", "runtime": "cli 2.1", "trial": trial,
                             "skill_loaded": loaded,
                             "criteria": [{"index": 0, "passed": rng.choice([True, False]),
                                           "evidence": "test.log"},
                                          {"index": 1, "passed": rng.choice([True, True, None]),
                                           "evidence": "unresolved: no log"}],
                             "elapsed_seconds": rng.choice([None, rng.uniform(5, 90)]),
                             "input_tokens": None, "output_tokens": None,
                             "artifacts": f"/tmp/{case}-{cond}-{trial}",
                             "skill_expected": should})
    return rows


def test_imported_trial_rows_in_both_backends(tmp_path, db_url):
    rows = _trial_rows()
    path = tmp_path / "trials.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = import_trials(db_url, path, "imp")
    assert (summary.runs, summary.tasks, summary.unchanged) == (27, 3, False)
    assert import_trials(db_url, path, "imp").unchanged is True
    report = compute_report(init_db(db_url), "imp", n_resamples=200)

    for row in rows:  # outcome: every criterion passed, one failed, or one unresolved
        verdicts = [c["passed"] for c in row["criteria"]]
        row["outcome"] = ("incorrect" if False in verdicts else
                          "grading_failure" if None in verdicts else "correct")
    got_outcomes = {(r["fixture"], r["condition"], r["repetition"]): r["outcome"]
                    for r in report["trial_rows"]}
    assert got_outcomes == {(r["case_id"], r["condition"], r["trial"]): r["outcome"]
                            for r in rows}

    cases = report["skill_activation"]["models"]["exact-model-1"]["cases"]
    for case, entry in cases.items():
        for cond, cell in entry["conditions"].items():
            mine = [r for r in rows if r["case_id"] == case and r["condition"] == cond]
            should = mine[0]["skill_expected"] if mine[0]["skill_commit"] else False
            loads = [r["skill_loaded"] for r in mine]
            known = loads.count(True) + loads.count(False)
            assert cell["misses"] == (loads.count(False) if should is True and known else None)
            assert cell["false_positives"] == (loads.count(True) if should is False and known
                                               else None)
            assert cell["unknown"] == loads.count(None)
            times = sorted(r["elapsed_seconds"] for r in mine if r["elapsed_seconds"] is not None)
            lat = cell["latency_seconds"]
            assert lat["unreported"] == len(mine) - len(times)
            if times:
                n = len(times)
                middle = times[n // 2] if n % 2 else (times[n // 2 - 1] + times[n // 2]) / 2
                assert abs(lat["median"] - middle) < 1e-9 and lat["max"] == times[-1]
            else:
                assert lat["median"] is None
    assert cases["wrapper_api"]["conditions"]["skill_new"]["reason"] == \
        "the case declares no skill_expected"
    commits = report["skill_activation"]["models"]["exact-model-1"]["conditions"]
    assert commits["skill_old"]["skill_commit"] == "1111aaa"
    assert commits["without_skill"]["skill_commit"] is None
