"""`evalq import` of adjudicated results, then `evalq report --format json`, against independent computations."""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pytest
from scipy import stats as sps

from conftest import run_cli
from adjudicated_gen import CONDITIONS, FIELDS, generate


def _read(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _imported_report(tmp_path, db_url, *extra_args, **gen):
    paths = generate(tmp_path / "data", **gen)
    env = {"EVALQ_DATABASE_URL": db_url, "EVALQ_HOME": str(tmp_path / "home")}
    proc = run_cli(["import", str(paths["results"]), "--study", "s3",
                    "--raters", str(paths["raters"]),
                    "--adjudications", str(paths["adjudications"]), *extra_args], env)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "r.json"
    proc = run_cli(["report", "s3", "--format", "json", "--out", str(out)], env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(out.read_text()), paths, env


def _task_rates(rows, cond, value):
    by_task = defaultdict(list)
    for r in rows:
        if r["condition"] == cond:
            by_task[r["task_id"]].append(value(r))
    return {t: float(np.mean(v)) for t, v in sorted(by_task.items())}


def _hand_cohen(a, b):
    n = len(a)
    po = sum(x == y for x, y in zip(a, b)) / n
    pa, pb = sum(a) / n, sum(b) / n
    pe = pa * pb + (1 - pa) * (1 - pb)
    return (po - pe) / (1 - pe)


def _hand_fleiss(items):
    """items: list of label lists (same length n); textbook Fleiss over categories False/True."""
    n = len(items[0])
    N = len(items)
    p_i = []
    totals = {False: 0, True: 0}
    for labels in items:
        counts = {c: sum(1 for x in labels if x == c) for c in (False, True)}
        for c in counts:
            totals[c] += counts[c]
        p_i.append((sum(v * v for v in counts.values()) - n) / (n * (n - 1)))
    p_bar = sum(p_i) / N
    pe = sum((totals[c] / (N * n)) ** 2 for c in totals)
    return (p_bar - pe) / (1 - pe)


def test_imported_report_matches_independent_statistics(tmp_path):
    report, paths, env = _imported_report(tmp_path, f"sqlite:///{tmp_path}/e.db")
    rows = _read(paths["results"])
    assert report["study"]["source"] == "adjudicated-results"
    assert report["trials"]["planned"] == len(rows) == 60
    seed = report["inference"]["bootstrap"]["seed"]
    # TPR per condition and its bootstrap CI, against scipy's own bootstrap.
    for cond in CONDITIONS:
        rates = _task_rates(rows, cond, lambda r: r["passed"])
        got = report["conditions"][cond]["metrics"]["tpr"]
        assert got["estimate"] == pytest.approx(np.mean(list(rates.values())))
        assert got["n_tasks"] == 10 and got["k"] == 3
        ref = sps.bootstrap((np.array(list(rates.values())),), np.mean, n_resamples=10000,
                            method="percentile", random_state=np.random.default_rng(seed + 1))
        assert got["ci_low"] == pytest.approx(ref.confidence_interval.low, abs=0.03)
        assert got["ci_high"] == pytest.approx(ref.confidence_interval.high, abs=0.03)
        # outcomes: passed maps to correct/incorrect
        assert report["conditions"][cond]["outcomes"]["correct"] == sum(
            r["passed"] for r in rows if r["condition"] == cond)
        # RFR, CPR, NRR by hand (task-weighted means of per-run booleans)
        rfr = _task_rates(rows, cond, lambda r: (not r["regression"]) and r["hidden_validation_passed"])
        cpr = _task_rates(rows, cond, lambda r: r["passed"] and r["validation_passed"]
                          and not r["regression"] and not r["rework_required"])
        nrr = _task_rates(rows, cond, lambda r: not r["rework_required"])
        rp = _task_rates(rows, cond, lambda r: r["passed"])
        for key, values in (("rfr", rfr), ("cpr", cpr), ("nrr", nrr)):
            assert report["conditions"][cond]["metrics"][key]["estimate"] == pytest.approx(
                np.mean(list(values.values())))
        assert report["conditions"][cond]["metrics"]["rp_at_k"]["estimate"] == pytest.approx(
            np.mean([v == 1.0 for v in rp.values()]))
    # Paired comparison: per-task differences, exact sign-flip p against scipy.
    comp = report["comparisons"][0]
    assert (comp["baseline"], comp["candidate"]) == ("single_prompt", "workflow_guided")
    assert comp["compatible"] is True
    for metric, value in (("tpr", lambda r: r["passed"]),
                          ("rfr", lambda r: (not r["regression"]) and r["hidden_validation_passed"])):
        cand = _task_rates(rows, "workflow_guided", value)
        base = _task_rates(rows, "single_prompt", value)
        diffs = np.array([cand[t] - base[t] for t in sorted(cand)])
        got = comp["metrics"][metric]
        assert got["delta"] == pytest.approx(diffs.mean())
        ref = sps.permutation_test((diffs,), lambda x, axis: np.mean(x, axis=axis),
                                   permutation_type="samples", n_resamples=np.inf,
                                   alternative="two-sided", vectorized=True)
        assert got["p_value"] == pytest.approx(ref.pvalue, abs=1e-9)
        ci = sps.bootstrap((diffs,), np.mean, n_resamples=10000, method="percentile",
                           random_state=np.random.default_rng(7))
        assert got["ci_low"] == pytest.approx(ci.confidence_interval.low, abs=0.04)
        assert got["ci_high"] == pytest.approx(ci.confidence_interval.high, abs=0.04)
    # Holm over the primary family H1-H3 (tpr, rp_at_k, rfr), by hand.
    family = {m: comp["metrics"][m]["p_value"] for m in ("tpr", "rp_at_k", "rfr")}
    ordered = sorted(family.items(), key=lambda kv: kv[1])
    running, expected = 0.0, {}
    for rank, (m, p) in enumerate(ordered):
        running = max(running, min(1.0, (3 - rank) * p))
        expected[m] = running
    for m, value in expected.items():
        assert comp["metrics"][m]["p_holm"] == pytest.approx(value)
    assert comp["metrics"]["cpr"]["p_holm"] is None  # secondary: descriptive only
    # Reliability: two fixed raters -> Cohen; human_accepted is the published example (0.4).
    raters = _read(paths["raters"])
    rel = report["reliability"]
    assert rel["human_accepted"]["kind"] == "cohen"
    assert rel["human_accepted"]["kappa"] == pytest.approx(0.4)
    assert rel["human_accepted"]["n_items"] == 50
    by_run = defaultdict(dict)
    for r in raters:
        by_run[(r["task_id"], r["condition"], r["run_id"])][r["rater_id"]] = r
    for field in ("passed", "regression"):
        a = [v["r1"][field] for v in by_run.values()]
        b = [v["r2"][field] for v in by_run.values()]
        assert rel[field]["kappa"] == pytest.approx(_hand_cohen(a, b))
        assert rel[field]["agreement"] == pytest.approx(np.mean([x == y for x, y in zip(a, b)]))
        sub = [(v["r1"][field], v["r2"][field]) for k, v in by_run.items() if k[1] == "single_prompt"]
        assert rel[field]["by_condition"]["single_prompt"]["kappa"] == pytest.approx(
            _hand_cohen([x for x, _ in sub], [y for _, y in sub]))
    assert report["low_reliability"] == any(
        rel[o]["kappa"] is not None and rel[o]["kappa"] < 0.6 for o in ("passed", "regression"))
    assert report["power_warning"] is True  # 10 tasks < 30
    # Round trip: export results reproduces the imported rows.
    out = tmp_path / "back.jsonl"
    proc = run_cli(["export", "s3", "--format", "results", "--out", str(out)], env)
    assert proc.returncode == 0, proc.stderr
    assert sorted(_read(out), key=lambda r: r["run_order"]) == sorted(rows, key=lambda r: r["run_order"])


def test_rotating_raters_use_fleiss_kappa(tmp_path):
    report, paths, _ = _imported_report(tmp_path, f"sqlite:///{tmp_path}/f.db", rotating=True)
    by_run = defaultdict(list)
    for r in _read(paths["raters"]):
        by_run[(r["task_id"], r["condition"], r["run_id"])].append(r["passed"])
    block = report["reliability"]["passed"]
    assert block["kind"] == "fleiss"
    assert block["kappa"] == pytest.approx(_hand_fleiss(list(by_run.values())))


def test_import_into_postgres_and_reimport_is_idempotent(tmp_path, postgres_url):
    report, paths, env = _imported_report(tmp_path, postgres_url)
    assert report["trials"]["finished"] == 60
    again = run_cli(["import", str(paths["results"]), "--study", "s3", "--raters",
                     str(paths["raters"]), "--adjudications", str(paths["adjudications"])], env)
    assert again.returncode == 0, again.stderr
    changed = paths["results"].read_text().replace('"run_order": 1,', '"run_order": 1000,', 1)
    paths["results"].write_text(changed)
    refused = run_cli(["import", str(paths["results"]), "--study", "s3"], env)
    assert refused.returncode == 2 and "new id" in refused.stderr


@pytest.mark.parametrize("mutate, field", [
    (lambda row: row.pop("passed"), "passed"),
    (lambda row: row.update(passed="yes"), "passed"),
    (lambda row: row.update(run_id="1"), "run_id"),
])
def test_bad_results_row_is_one_line_error(tmp_path, mutate, field):
    paths = generate(tmp_path / "data", tasks=2)
    rows = _read(paths["results"])
    mutate(rows[3])
    paths["results"].write_text("".join(json.dumps(r) + "\n" for r in rows))
    proc = run_cli(["import", str(paths["results"]), "--study", "bad"],
                   {"EVALQ_DATABASE_URL": f"sqlite:///{tmp_path}/b.db"})
    assert proc.returncode == 2
    line = proc.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert str(paths["results"]) in line and f"field '{field}'" in line and "line 4" in line


def test_adjudication_disagreeing_with_results_is_refused(tmp_path):
    paths = generate(tmp_path / "data", tasks=3)
    adj = _read(paths["adjudications"])
    field = next(f for f in FIELDS if f in adj[0])
    adj[0][field] = not adj[0][field]
    paths["adjudications"].write_text("".join(json.dumps(r) + "\n" for r in adj))
    proc = run_cli(["import", str(paths["results"]), "--study", "x", "--adjudications",
                    str(paths["adjudications"])], {"EVALQ_DATABASE_URL": f"sqlite:///{tmp_path}/a.db"})
    assert proc.returncode == 2 and f"field '{field}'" in proc.stderr


def test_study_imported_under_the_earlier_source_name_reads_as_imported(tmp_path):
    """Databases written before the source was renamed keep reading as imported studies."""
    import sqlite3

    db = tmp_path / "e.db"
    report, _, env = _imported_report(tmp_path, f"sqlite:///{db}")
    with sqlite3.connect(db) as conn:
        lock = json.loads(conn.execute("select lock from studies where id='s3'").fetchone()[0])
        conn.execute("update studies set lock=? where id='s3'",
                     (json.dumps({**lock, "source": "seed-003"}),))
        conn.execute("update attempts set grade=replace(grade, '\"adjudicated-results\"', "
                     "'\"seed-003\"')")
    out = tmp_path / "again.json"
    assert run_cli(["report", "s3", "--format", "json", "--out", str(out)], env).returncode == 0
    again = json.loads(out.read_text())
    assert again["study"]["source"] == "adjudicated-results"
    assert again["conditions"] == report["conditions"]
