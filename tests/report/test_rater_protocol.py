"""Blinded review by raters, end to end: a real study run on the embedded default by scripted
agents, packets for a rater pool that holds the executor, two raters who disagree, refusal
until a third rater adjudicates, a rating by the executor refused, a run short of a second
rater named, and a change of environment mid-study splitting the report. Agreement and each
part's paired difference are recomputed here by counting."""

from __future__ import annotations

import json
from collections import defaultdict

from conftest import run_cli, write_study

FIELDS = ("passed", "validation_passed", "human_accepted", "regression", "rework_required",
          "requirements_traceability")


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _key(row):
    return {"task_id": row["task_id"], "condition": row["condition"], "run_id": row["run_id"]}


def _cohen(pairs):
    n = len(pairs)
    observed = sum(1 for a, b in pairs if a == b) / n
    chance = 0.0
    for label in (True, False):
        chance += (sum(1 for a, _ in pairs if a is label) / n) * \
            (sum(1 for _, b in pairs if b is label) / n)
    return observed, (observed - chance) / (1 - chance)


def _tpr_delta(rows, baseline, candidate):
    """Mean over tasks of (candidate's pass rate - baseline's), tasks holding both."""
    rates = defaultdict(dict)
    for task in {r["task_id"] for r in rows}:
        for cond in (baseline, candidate):
            mine = [r["passed"] for r in rows if r["task_id"] == task and r["condition"] == cond]
            if mine:
                rates[task][cond] = sum(mine) / len(mine)
    diffs = [v[candidate] - v[baseline] for v in rates.values() if len(v) == 2]
    return sum(diffs) / len(diffs)


def _report(env, study, tmp_path):
    out = tmp_path / f"{study}.json"
    proc = run_cli(["report", study, "--format", "json", "--out", str(out)], env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(out.read_text())


def test_raters_disagree_adjudicate_executors_barred_environment_split(tmp_path,
                                                                       fixture_copies):
    study = write_study(tmp_path / "study", fixture_copies, study_id="rated", repetitions=3)
    env = {"EVALQ_HOME": str(tmp_path / "home"), "EVALQ_EXECUTOR": "alice"}
    proc = run_cli(["run", str(study)], env, timeout=600)
    assert proc.returncode == 0, proc.stderr

    # blind: alice executed every run, so a pool of alice and bob leaves one rater per packet
    packets = tmp_path / "packets"
    refused = run_cli(["blind", "rated", "--out", str(packets), "--rater", "alice",
                       "--rater", "bob"], env)
    assert refused.returncode == 2 and not packets.exists()
    assert len(refused.stderr.strip().splitlines()) == 1
    assert "alice executed it and may not score it" in refused.stderr
    ok = run_cli(["blind", "rated", "--out", str(packets), "--rater", "alice", "--rater", "bob",
                  "--rater", "carol"], env)
    assert ok.returncode == 0, ok.stderr
    template = [json.loads(l) for l in (packets / "raters.template.jsonl").read_text().splitlines()]
    assigned = defaultdict(list)
    for row in template:
        assigned[row["packet_id"]].append(row["rater_id"])
    assert len(assigned) == 12 and all(sorted(v) == ["bob", "carol"] for v in assigned.values())
    key = [json.loads(l) for l in (tmp_path / "packets.key.jsonl").read_text().splitlines()]
    assert all(k["executor_ids"] == ["alice"] for k in key)
    # erin resumes the study: she executed it too, and is barred from rating it as well
    resumed = run_cli(["run", str(study), "--resume"], dict(env, EVALQ_EXECUTOR="erin"),
                      timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    refused = run_cli(["blind", "rated", "--out", str(tmp_path / "again"), "--rater", "erin",
                       "--rater", "bob"], env)
    assert refused.returncode == 2 and "erin executed it" in refused.stderr

    # results as the raters will have them: the exported rows, with adjudicated scores
    exported = tmp_path / "exported.jsonl"
    assert run_cli(["export", "rated", "--format", "results", "--out", str(exported)],
                   env).returncode == 0
    rows = sorted((json.loads(l) for l in exported.read_text().splitlines()),
                  key=lambda r: r["run_order"])
    assert all(r["executor_ids"] == ["alice", "erin"] for r in rows)
    ratings, adjudications = [], []
    for i, row in enumerate(rows):
        final = {"passed": row["passed"] if i % 4 else not row["passed"],
                 "validation_passed": row["passed"], "human_accepted": i % 3 == 0,
                 "regression": i % 5 == 0, "rework_required": i % 2 == 0,
                 "requirements_traceability": True}
        row.update(final, rater_ids=["bob", "carol"], adjudicated=False)
        bob, carol = dict(final), dict(final)
        if i % 3 == 1:  # carol sees rework where bob does not, or the other way round
            carol["rework_required"] = not final["rework_required"]
        if i == 5:
            carol["passed"] = not final["passed"]
        split = {f: final[f] for f in FIELDS if bob[f] != carol[f]}
        if split:
            row["adjudicated"] = True
            adjudications.append(dict(_key(row), adjudicator_id="dana", **split))
        ratings += [dict(_key(row), rater_id="bob", **bob),
                    dict(_key(row), rater_id="carol", **carol)]
    results = _write(tmp_path / "results.jsonl", rows)
    raters = _write(tmp_path / "raters.jsonl", ratings)
    adjud = _write(tmp_path / "adjudications.jsonl", adjudications)
    db = {**env, "EVALQ_DATABASE_URL": f"sqlite:///{tmp_path}/rated.db"}

    # disagreements without adjudications: refused, one line per run, naming file and field
    proc = run_cli(["import", str(results), "--study", "r1", "--raters", str(raters)], db)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == len(adjudications), proc.stderr
    assert all(str(raters) in line and "disagree" in line and "--adjudications" in line
               for line in lines)
    assert any("field 'passed'" in line for line in lines)
    assert run_cli(["studies"], db).stdout.count("r1") == 0

    # the executor rating a run she executed: refused, whatever the others say
    barred = _write(tmp_path / "barred.jsonl",
                    ratings + [dict(_key(rows[0]), rater_id="alice", **{f: True for f in FIELDS})])
    proc = run_cli(["import", str(results), "--study", "r1", "--raters", str(barred),
                    "--adjudications", str(adjud)], db)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "rater alice executed the run" in proc.stderr and "field 'rater_id'" in proc.stderr

    # adjudicated: accepted; agreement recomputed from the raw ratings
    proc = run_cli(["import", str(results), "--study", "r1", "--raters", str(raters),
                    "--adjudications", str(adjud)], db)
    assert proc.returncode == 0, proc.stderr
    assert "ratings incomplete" not in proc.stdout
    report = _report(db, "r1", tmp_path)
    assert report["rater_coverage"]["complete"] is True
    assert report["environment_split"] is None
    by_run = defaultdict(dict)
    for r in ratings:
        by_run[r["task_id"], r["condition"], r["run_id"]][r["rater_id"]] = r
    pairs = [(v["bob"]["rework_required"], v["carol"]["rework_required"])
             for v in by_run.values()]
    agreement, kappa = _cohen(pairs)
    block = report["reliability"]["rework_required"]
    assert block["kind"] == "cohen"
    assert abs(block["agreement"] - agreement) < 1e-12 and abs(block["kappa"] - kappa) < 1e-12

    # a run with one rater: imported, named, and the claims say the ratings are incomplete
    short = _write(tmp_path / "short.jsonl",
                   [r for r in ratings if not (r["rater_id"] == "carol" and
                                               _key(r) == _key(rows[2]))])
    proc = run_cli(["import", str(results), "--study", "r2", "--raters", str(short),
                    "--adjudications", str(adjud)], db)
    assert proc.returncode == 0, proc.stderr
    assert "ratings incomplete: 1 of 12 runs" in proc.stdout
    report = _report(db, "r2", tmp_path)
    assert report["rater_coverage"]["under_two_raters"] == 1
    assert report["rater_coverage"]["trials"] == [
        f"r2/{rows[2]['task_id']}/{rows[2]['condition']}/{rows[2]['run_id']}"]
    assert any(r.startswith("ratings incomplete: 1 of 12") for r in report["claims"]["reasons"])

    # the model revision changed after the sixth run: two studies in one, reported apart
    changed = [dict(r, env=dict(r["env"], model_id="model-2026-06-01"))
               if r["run_order"] > rows[5]["run_order"] else r for r in rows]
    _write(results, changed)
    proc = run_cli(["import", str(results), "--study", "r3", "--raters", str(raters),
                    "--adjudications", str(adjud)], db)
    assert proc.returncode == 0, proc.stderr
    report = _report(db, "r3", tmp_path)
    split = report["environment_split"]
    assert split["environments"] == 2 and list(split["differing_fields"]) == ["model_id"]
    assert [p["runs"] for p in split["parts"]] == [6, 6]
    assert report["claims"]["status"] == "exploratory"
    assert any("environment changed within the study" in r for r in report["claims"]["reasons"])
    for part, rows_of_part in zip(split["parts"], (changed[:6], changed[6:])):
        assert part["values"]["model_id"] == rows_of_part[0]["env"].get("model_id")
        for comp in part["comparisons"]:
            want = _tpr_delta(rows_of_part, comp["baseline"], comp["candidate"])
            assert abs(comp["metrics"]["tpr"]["delta"] - want) < 1e-12
    md = tmp_path / "r3.md"
    assert run_cli(["report", "r3", "--format", "md", "--out", str(md)], db).returncode == 0
    text = md.read_text()
    assert "## Environment split" in text and "### Environment 2: model_id = model-2026-06-01" \
        in text
