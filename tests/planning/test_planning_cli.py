"""`evalq plan` and the launch check end to end: a real embedded pilot, the lock, `evalq run --yes`."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import EVALQ

from planning_pilots import insert_pilot, manifest


def cli(args, env_extra, timeout=600):
    """The CLI with no terminal on stdin, so the launch check cannot prompt."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALQ_")}
    env.update(env_extra)
    return subprocess.run([*EVALQ, *args], env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=timeout)


def one_line_error(proc):
    assert proc.returncode == 2, proc.stderr + proc.stdout
    assert "Traceback" not in proc.stderr
    lines = [l for l in proc.stderr.splitlines() if l.startswith("evalq: error:")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_pilot_plan_lock_and_launch_check(tmp_path, fixture_copies):
    home = {"EVALQ_HOME": str(tmp_path / "home")}
    pilot = manifest(tmp_path / "pilot", fixture_copies, "pilot", repetitions=2)  # 8 trials

    # Above the threshold without --yes: the count is shown, cost and time unavailable, refused.
    refused = cli(["run", str(pilot)], {**home, "EVALQ_CONFIRM_ABOVE": "4"})
    error = one_line_error(refused)
    assert "plans 8 trials, more than 4" in error and "--yes" in error
    assert "study pilot: 8 trials" in refused.stderr
    assert "cost: unavailable: no pilot plan in the study lock" in refused.stderr

    ran = cli(["run", str(pilot), "--yes"], {**home, "EVALQ_CONFIRM_ABOVE": "4"})
    assert ran.returncode == 0, ran.stderr + ran.stdout

    main = manifest(tmp_path / "main", fixture_copies, "main", repetitions=3)  # 12 trials
    args = ["plan", str(main), "--pilot", "pilot", "--workers", "2", "--simulations", "200",
            "--tasks", "5,10,40", "--repetitions", "1,2"]
    proc = cli([*args, "--json"], home)
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["comparison"] == {"baseline": "bad", "candidate": "good",
                                  "source": "the study's primary hypothesis", "metric": "tpr",
                                  "pilot_tasks_used": 2}
    assert plan["pilot"]["trials"] == 8 and plan["pilot"]["valid_trials"] == 8
    # the protocol's floors (30 tasks, k = 3) and the study as written join the grid
    assert {(r["tasks"], r["repetitions"]) for r in plan["grid"]} == {
        (n, k) for n in (2, 5, 10, 30, 40) for k in (1, 2, 3)}
    assert plan["floors"]["min_tasks"] == 30 and plan["floors"]["min_repetitions"] == 3
    assert plan["target"]["family_size"] == 1 and plan["target"]["alpha_per_hypothesis"] == 0.05
    # The baseline never passes, so the candidate's rate is 0 + 0.10 on every task: a k-run
    # task difference is Binomial(k, 0.1)/k >= 0, and the sign-flip test rejects exactly when
    # enough tasks are nonzero. 1 - 0.9**(n k) is the chance any task is nonzero, an upper
    # bound on power: 10 tasks × 1 run can reach at most 0.65, below the target.
    for row in plan["grid"]:
        assert row["power"] <= 1 - 0.9 ** (row["tasks"] * row["repetitions"]) + 1e-9
    chosen = plan["chosen_design"]
    assert chosen["tasks"] >= 30 and chosen["repetitions"] >= 3 and chosen["meets_target"]
    assert plan["ranking"] == {"by": "expected cost", "note": None}
    eligible = [r for r in plan["grid"] if r["meets_target"] and r["within_floors"]]
    assert chosen["forecast_cost_usd"] == min(r["forecast_cost_usd"] for r in eligible)
    assert chosen["trials"] == chosen["tasks"] * chosen["repetitions"] * 2
    assert any("no run-to-run variation" in c for c in plan["pilot_cautions"])
    # Per-run cost: four runs at 0.05, four at 0.02 -> median 0.035, p90 0.05, mean 0.035.
    cost = plan["forecast"]["cost_usd"]
    assert cost["available"] is True
    assert cost["per_run"] == pytest.approx({"median": 0.035, "p90": 0.05, "mean": 0.035})
    assert cost["total_at_median"] == pytest.approx(chosen["trials"] * 0.035)
    assert cost["total_at_p90"] == pytest.approx(chosen["trials"] * 0.05)
    assert plan["forecast"]["wall_seconds"]["waves"] == chosen["trials"] // 2

    text = cli(args, home)
    assert text.returncode == 0, text.stderr
    assert "← recommended (lowest expected cost meeting the target)" in text.stdout
    assert f"cost: ${chosen['trials'] * 0.035:,.2f} at the pilot's median run" in text.stdout
    assert "(below the floors)" in text.stdout

    # The plan goes into the lock without changing the lock's digest.
    from evalq.study.lock import build_lock, verify_lock
    from evalq.study.manifest import load_manifest

    written = cli([*args, "--write-lock"], home)
    assert written.returncode == 0, written.stderr
    study = load_manifest(main)
    lock = json.loads(study.lock_path.read_text())
    assert lock["lock_digest"] == build_lock(study)["lock_digest"]
    assert verify_lock(study)["lock_digest"] == lock["lock_digest"]
    section = lock["planning"]
    assert section["pilot"]["digest"] == plan["pilot"]["digest"]
    assert section["chosen_design"]["tasks"] == chosen["tasks"]
    assert section["target"]["effect"] == 0.10 and section["assumptions"]
    assert section["preregistration"] == {"before_runs": True, "attempts_at_planning": 0,
                                          "forced": False, "note": None}

    # The pilot itself has run: a plan for it now is not a pre-registration.
    pilot_args = ["plan", str(pilot), "--pilot", "pilot", "--simulations", "100", "--tasks", "5",
                  "--repetitions", "1", "--write-lock"]
    pilot_lock = load_manifest(pilot).lock_path
    before = pilot_lock.read_bytes()
    after_the_fact = one_line_error(cli(pilot_args, home))
    assert "already has 8 attempts" in after_the_fact and "not a pre-registration" in after_the_fact
    assert "field '--write-lock'" in after_the_fact and "--force" in after_the_fact
    assert pilot_lock.read_bytes() == before  # nothing half-written
    forced = cli([*pilot_args, "--force"], home)
    assert forced.returncode == 0, forced.stderr
    prereg = json.loads(pilot_lock.read_text())["planning"]["preregistration"]
    assert prereg["before_runs"] is False and prereg["forced"] is True
    assert prereg["attempts_at_planning"] == 8 and "not a pre-registration" in prereg["note"]
    # ... and the pilot's report, read from the database the runs were written to, says so:
    # a plan made after seeing results may have picked k by optional stopping.
    out = tmp_path / "pilot-report.json"
    reported = cli(["report", "pilot", "--format", "json", "--out", str(out)], home)
    assert reported.returncode == 0, reported.stderr
    report = json.loads(out.read_text())
    assert report["power_plan"]["recorded"] is True and report["power_plan"]["intact"] is True
    assert report["power_plan"]["before_runs"] is False
    assert report["power_plan"]["attempts_at_planning"] == 8
    assert report["claims"]["status"] == "exploratory"
    assert any("power plan was written after 8 attempts" in r
               for r in report["claims"]["reasons"]), report["claims"]
    md = tmp_path / "pilot-report.md"
    assert cli(["report", "pilot", "--format", "md", "--out", str(md)], home).returncode == 0
    assert "power plan: **written after 8 attempts had run**" in md.read_text()

    # `evalq run` of the 12-trial study now shows the forecast from the lock and needs --yes.
    gated = cli(["run", str(main)], {**home, "EVALQ_CONFIRM_ABOVE": "10"})
    one_line_error(gated)
    assert "forecast from pilot 'pilot'" in gated.stderr
    assert "cost: $0.42 at the pilot's median run, $0.60 at its 90th percentile" in gated.stderr
    assert "wall time on 2 agent workers" in gated.stderr

    # Adopting a different design and re-freezing with --force keeps the plan as it was written.
    main.write_text(main.read_text().replace("repetitions = 3", "repetitions = 2"))
    refrozen = cli(["study", "freeze", str(main), "--force"], home)
    assert refrozen.returncode == 0, refrozen.stderr
    after = json.loads(study.lock_path.read_text())
    assert after["repetitions"] == 2 and after["lock_digest"] != lock["lock_digest"]
    assert after["planning"] == section


def test_plan_with_a_costless_pilot_says_why(tmp_path, fixture_copies):
    home = tmp_path / "home"
    runs = [{"task": t, "condition": c, "repetition": r,
             "attempts": [{"outcome": "correct" if (c == "good" or r == 0) else "incorrect",
                           "start": 0.0, "end": 30.0}]}
            for t in ("a", "b", "c") for c in ("bad", "good") for r in range(3)]
    insert_pilot(home / "evalq.db", "costless", runs)
    main = manifest(tmp_path / "main", fixture_copies, "main", repetitions=3)
    proc = cli(["plan", str(main), "--pilot", "costless", "--simulations", "100", "--tasks", "5",
                "--repetitions", "1"], {"EVALQ_HOME": str(home)})
    assert proc.returncode == 0, proc.stderr
    assert ("cost: unavailable: none of the pilot's 18 attempts reports a cost "
            "(metrics.cost_usd and metrics.reported_cost_usd: null)") in proc.stdout
    assert "wall time: unavailable: the number of agent workers is not known" in proc.stdout
    assert "$0.00" not in proc.stdout


@pytest.mark.parametrize("flags, field", [(["--effect", "0"], "--effect"),
                                          (["--power", "1.5"], "--power"),
                                          (["--workers", "0"], "--workers"),
                                          (["--tasks", "ten"], "--tasks"),
                                          (["--min-tasks", "0"], "--min-tasks"),
                                          (["--min-repetitions", "-1"], "--min-repetitions")])
def test_bad_plan_input_is_one_line(tmp_path, fixture_copies, flags, field):
    home = tmp_path / "home"
    insert_pilot(home / "evalq.db", "p", [{"task": "a", "condition": "good",
                                           "attempts": [{"outcome": "correct"}]}])
    main = manifest(tmp_path / "main", fixture_copies, "main", repetitions=3)
    proc = cli(["plan", str(main), "--pilot", "p", "--simulations", "100", *flags],
               {"EVALQ_HOME": str(home)})
    assert f"field '{field}'" in one_line_error(proc)
