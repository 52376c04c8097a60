"""Issue 18 (analysis): three conditions with Holm over every named pair, runs with two or three
ratings, passed: null, pass@k and pass^k for every k, and the export -> import round trip,
each against an independent computation (brute force, scipy, the krippendorff package)."""

from __future__ import annotations

import json
import random
from collections import defaultdict
from itertools import combinations, permutations

import krippendorff
import numpy as np
import pytest
from scipy import stats as sps

from conftest import run_cli
from report_native_rows import make_study
from adjudicated_gen import adjudicate, generate

from evalq.results.store import init_db, read_study

THIRD = "third_arm"


def _read(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _three_conditions(folder):
    """Seed-003 rows of three conditions; every fourth run has a third rating; some passed null."""
    paths = generate(folder, tasks=8, k=3, seed=4, rotating=True)
    rng = random.Random(8)
    results, raters = _read(paths["results"]), _read(paths["raters"])
    extra, extra_ratings = [], []
    for row in [r for r in results if r["condition"] == "workflow_guided"]:
        new = dict(row, condition=THIRD, run_order=row["run_order"] + 1000,
                   passed=rng.random() < 0.4, regression=rng.random() < 0.3)
        extra.append(new)
    results += extra
    for r in [r for r in raters if r["condition"] == "workflow_guided"]:
        extra_ratings.append(dict(r, condition=THIRD))
    raters += extra_ratings
    for i, row in enumerate(results):
        if i % 4 == 0:
            used = {r["rater_id"] for r in raters if (r["task_id"], r["condition"], r["run_id"])
                    == (row["task_id"], row["condition"], row["run_id"])}
            third = next(x for x in ("r1", "r2", "r3", "r4") if x not in used)
            raters.append({"task_id": row["task_id"], "condition": row["condition"],
                           "run_id": row["run_id"], "rater_id": third,
                           **{f: rng.random() < 0.5 for f in ("passed", "validation_passed",
                                                              "human_accepted", "regression",
                                                              "rework_required",
                                                              "requirements_traceability")}})
        if i % 11 == 5:
            row["passed"] = None  # an unresolved criterion
    _write(paths["results"], results)
    _write(paths["raters"], raters)
    adjudicate(paths)  # the third rater settles every disagreement
    return paths, results, raters


def _valid_by_task(rows, cond):
    out = defaultdict(list)
    for r in sorted(rows, key=lambda r: r["run_id"]):
        if r["condition"] == cond:
            out[r["task_id"]].append(r["passed"])
    return {t: [v for v in vals if v is not None] for t, vals in sorted(out.items())}


def _brute_pass(valid, k, every):
    per_task = []
    for runs in valid.values():
        if len(runs) < k:
            continue
        subsets = list(combinations(runs, k))
        per_task.append(np.mean([(all if every else any)(s) for s in subsets]))
    return float(np.mean(per_task)) if per_task else None


def _exact_p(diffs):
    ref = sps.permutation_test((np.asarray(diffs),), lambda x, axis: np.mean(x, axis=axis),
                               permutation_type="samples", n_resamples=np.inf,
                               alternative="two-sided", vectorized=True)
    return ref.pvalue


def test_three_conditions_rotating_raters_nulls_and_pass_at_every_k(tmp_path):
    paths, rows, raters = _three_conditions(tmp_path / "data")
    env = {"EVALQ_DATABASE_URL": f"sqlite:///{tmp_path}/e.db", "EVALQ_HOME": str(tmp_path / "h")}
    proc = run_cli(["import", str(paths["results"]), "--study", "s3",
                    "--raters", str(paths["raters"]),
                    "--adjudications", str(paths["adjudications"])], env)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "r.json"
    assert run_cli(["report", "s3", "--format", "json", "--out", str(out)], env).returncode == 0
    report = json.loads(out.read_text())
    md = tmp_path / "r.md"
    assert run_cli(["report", "s3", "--format", "md", "--out", str(md)], env).returncode == 0

    # Every condition imported; every candidate against the default baseline; Holm over all six.
    assert sorted(report["conditions"]) == sorted(["single_prompt", "workflow_guided", THIRD])
    pairs = {(c["baseline"], c["candidate"]): c for c in report["comparisons"]}
    assert set(pairs) == {("single_prompt", "workflow_guided"), ("single_prompt", THIRD)}
    family = {}
    for (base, cand), comp in pairs.items():
        b, c = _valid_by_task(rows, base), _valid_by_task(rows, cand)
        diffs = [np.mean(c[t]) - np.mean(b[t]) for t in sorted(b) if b[t] and c[t]]
        assert comp["metrics"]["tpr"]["delta"] == pytest.approx(np.mean(diffs))
        assert comp["metrics"]["tpr"]["p_value"] == pytest.approx(_exact_p(diffs), abs=1e-9)
        for m in ("tpr", "rp_at_k", "rfr"):
            family[(cand, m)] = comp["metrics"][m]["p_value"]
    ordered = sorted(family.items(), key=lambda kv: kv[1])
    running = 0.0
    for rank, (key, p) in enumerate(ordered):
        running = max(running, min(1.0, (len(ordered) - rank) * p))
        assert pairs[("single_prompt", key[0])]["metrics"][key[1]]["p_holm"] == pytest.approx(
            running)

    # Nulls: an unresolved run is a grading_failure with passed null, never counted as 0.
    nulls = {(r["task_id"], r["condition"], r["run_id"]) for r in rows if r["passed"] is None}
    assert nulls
    by_trial = {(t["fixture"], t["condition"], t["repetition"]): t for t in report["trial_rows"]}
    for key in nulls:
        assert by_trial[key]["passed"] is None and by_trial[key]["outcome"] == "grading_failure"

    # pass@k and pass^k for k = 1..3 against enumeration of every k-subset of each task's runs.
    for cond, block in report["conditions"].items():
        valid = _valid_by_task(rows, cond)
        assert [row["k"] for row in block["pass_k"]] == [1, 2, 3]
        for row in block["pass_k"]:
            assert row["pass_at_k"]["k"] == row["pass_hat_k"]["k"] == row["k"]
            assert row["pass_at_k"]["estimate"] == pytest.approx(
                _brute_pass(valid, row["k"], every=False))
            assert row["pass_hat_k"]["estimate"] == pytest.approx(
                _brute_pass(valid, row["k"], every=True))
    text = md.read_text()
    for comp in report["comparisons"]:
        assert {m["k"] for m in comp["metrics"].values()} == {3}
    assert "| pass@3 | no |" in text and "| pass^3 | no |" in text and "| RP@3 | yes |" in text
    for cond in report["conditions"]:
        for k in (1, 2, 3):
            assert f"| {k} | {cond} | " in text

    # Two or three ratings per run: generalised Fleiss by pair enumeration, alpha by the package.
    per_run = defaultdict(dict)
    for r in raters:
        per_run[(r["task_id"], r["condition"], r["run_id"])][r["rater_id"]] = r["passed"]
    block = report["reliability"]["passed"]
    assert block["kind"] == "fleiss" and block["ratings_per_item"].keys() == {"2", "3"}
    agree, pooled = [], []
    for labels in per_run.values():
        vals = list(labels.values())
        pairs_ = list(permutations(range(len(vals)), 2))
        agree.append(sum(vals[i] == vals[j] for i, j in pairs_) / len(pairs_))
        pooled += vals
    pe = (np.mean(pooled)) ** 2 + (1 - np.mean(pooled)) ** 2
    assert block["kappa"] == pytest.approx((np.mean(agree) - pe) / (1 - pe))
    ids = sorted({r for labels in per_run.values() for r in labels})
    matrix = np.array([[float(labels[i]) if i in labels else np.nan for labels in per_run.values()]
                       for i in ids])
    assert block["alpha"] == pytest.approx(krippendorff.alpha(
        reliability_data=matrix, level_of_measurement="nominal"))

    # Null stays null through export, and the export is the import's input.
    back = tmp_path / "back.jsonl"
    assert run_cli(["export", "s3", "--format", "results", "--out", str(back)],
                   env).returncode == 0
    assert sorted(_read(back), key=lambda r: r["run_order"]) == sorted(
        rows, key=lambda r: r["run_order"])


def test_candidate_alone_uses_the_default_baseline(tmp_path):
    paths, _, _ = _three_conditions(tmp_path / "data")
    env = {"EVALQ_DATABASE_URL": f"sqlite:///{tmp_path}/c.db", "EVALQ_HOME": str(tmp_path / "h")}
    proc = run_cli(["import", str(paths["results"]), "--study", "c", "--candidate", THIRD], env)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "c.json"
    assert run_cli(["report", "c", "--format", "json", "--out", str(out)], env).returncode == 0
    report = json.loads(out.read_text())
    assert [(c["baseline"], c["candidate"]) for c in report["comparisons"]] == [
        ("single_prompt", THIRD)]
    bad = run_cli(["import", str(paths["results"]), "--study", "d", "--candidate", "nope"], env)
    assert bad.returncode == 2 and "'nope' is not a condition" in bad.stderr
    # --baseline alone: every other condition against it, each with H1-H5
    proc = run_cli(["import", str(paths["results"]), "--study", "e", "--baseline",
                    "workflow_guided"], env)
    assert proc.returncode == 0, proc.stderr
    hyps = read_study(init_db(env["EVALQ_DATABASE_URL"]), "e").manifest["hypotheses"]
    assert sorted({(h["baseline"], h["candidate"]) for h in hyps}) == [
        ("workflow_guided", "single_prompt"), ("workflow_guided", THIRD)]
    assert len(hyps) == 10 and {h["id"] for h in hyps if h["candidate"] == THIRD} == {
        f"H{i}:{THIRD}" for i in range(1, 6)}


def test_native_export_round_trips_through_import(tmp_path):
    db = f"sqlite:///{tmp_path}/n.db"
    outcomes = ["correct", "incorrect", "grading_failure", "infrastructure_failure", "correct"]
    make_study(db, "native", outcome=lambda t, c, r: outcomes[(int(t[1]) + r + len(c)) % 5])
    env = {"EVALQ_DATABASE_URL": db, "EVALQ_HOME": str(tmp_path / "h")}
    first = tmp_path / "first.jsonl"
    assert run_cli(["export", "native", "--format", "results", "--out", str(first)],
                   env).returncode == 0
    proc = run_cli(["import", str(first), "--study", "back"], env)
    assert proc.returncode == 0, proc.stderr
    second = tmp_path / "second.jsonl"
    assert run_cli(["export", "back", "--format", "results", "--out", str(second)],
                   env).returncode == 0
    assert _read(second) == _read(first)
    assert any(r["passed"] is None for r in _read(first))
    reports = {}
    for study in ("native", "back"):
        out = tmp_path / f"{study}.json"
        assert run_cli(["report", study, "--format", "json", "--out", str(out)],
                       env).returncode == 0
        reports[study] = json.loads(out.read_text())
    for cond in ("base", "cand"):
        native = reports["native"]["conditions"][cond]["metrics"]["tpr"]["estimate"]
        assert reports["back"]["conditions"][cond]["metrics"]["tpr"]["estimate"] == \
            pytest.approx(native)


def test_pass_k_tables_equal_the_single_k_summaries():
    """The shared-resample path gives what metric_summary gives for each k on its own."""
    from evalq.analysis.condition_metrics import metric_summary, pass_k_tables
    from evalq.analysis.runs import Run

    rng = random.Random(2)
    by_condition = {}
    for cond, tasks in (("a", range(12)), ("b", range(3, 14))):  # partly different tasks
        by_condition[cond] = [
            Run(view=None, task=f"t{t:02d}", condition=cond, repetition=rep, order=rep,
                outcome=None, scores={},
                passed=None if rng.random() < 0.1 else rng.random() < 0.3 + t / 20)
            for t in tasks for rep in range(1, 6 - t % 3)]  # tasks with 5, 4 and 3 runs
    tables = pass_k_tables(by_condition, 5, seed=3, n_resamples=2_000)
    checked = 0
    for cond, runs in by_condition.items():
        assert [r["k"] for r in tables[cond]] == [1, 2, 3, 4, 5]
        for row in tables[cond]:
            for metric in ("pass_at_k", "pass_hat_k"):
                ref = metric_summary(runs, metric, row["k"], seed=3, n_resamples=2_000)
                got = row[metric]
                assert got["n_tasks"] == ref["n_tasks"] and got["k"] == ref["k"] == row["k"]
                for key in ("estimate", "ci_low", "ci_high"):
                    assert got[key] == pytest.approx(ref[key], abs=1e-12)
                checked += got["estimate"] is not None
    assert checked == 20
