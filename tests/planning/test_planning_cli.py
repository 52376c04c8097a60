"""`evalq plan` and the launch check end to end: a real embedded pilot, the lock, `evalq run --yes`."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import EVALQ, PY_FIXTURES

from planning_pilots import insert_pilot


def cli(args, env_extra, timeout=600):
    """The CLI with no terminal on stdin, so the launch check cannot prompt."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALQ_")}
    env.update(env_extra)
    return subprocess.run([*EVALQ, *args], env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=timeout)


def manifest(folder, fixtures_dir, study_id, repetitions):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{study_id}.toml"
    listed = ", ".join(f'"{(fixtures_dir / n).as_posix()}"' for n in PY_FIXTURES)
    path.write_text(f'''
id = "{study_id}"
fixtures = [{listed}]
repetitions = {repetitions}
seed = 3

[budgets]
wall_seconds = 120

[[conditions]]
name = "good"
agent = "scripted"
settings = {{ action = "solution", solution = "correct", usage = {{ input_tokens = 10, output_tokens = 5, cost_usd = 0.05 }} }}

[[conditions]]
name = "bad"
agent = "scripted"
settings = {{ action = "solution", solution = "incorrect", usage = {{ input_tokens = 10, output_tokens = 5, cost_usd = 0.02 }} }}

[[hypotheses]]
id = "H1"
metric = "tpr"
baseline = "bad"
candidate = "good"
''')
    return path


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
            "--tasks", "5,10", "--repetitions", "1,2"]
    proc = cli([*args, "--json"], home)
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["comparison"] == {"baseline": "bad", "candidate": "good",
                                  "source": "the study's primary hypothesis", "metric": "tpr",
                                  "pilot_tasks_used": 2}
    assert plan["pilot"]["trials"] == 8 and plan["pilot"]["valid_trials"] == 8
    assert {(r["tasks"], r["repetitions"]) for r in plan["grid"]} == {
        (n, k) for n in (2, 5, 10) for k in (1, 2, 3)}
    # Always-correct vs always-incorrect: differences are constant, so 6 tasks is the first
    # count the exact test can reject at 0.05; 5 cannot, 10 can with one repetition.
    assert plan["chosen_design"]["tasks"] == 10 and plan["chosen_design"]["repetitions"] == 1
    assert plan["chosen_design"]["trials"] == 20
    assert any("no run-to-run variation" in c for c in plan["pilot_cautions"])
    # Per-run cost: four runs at 0.05, four at 0.02 -> median 0.035, p90 0.05, mean 0.035.
    cost = plan["forecast"]["cost_usd"]
    assert cost["available"] is True
    assert cost["per_run"] == pytest.approx({"median": 0.035, "p90": 0.05, "mean": 0.035})
    assert cost["total_at_median"] == pytest.approx(20 * 0.035)
    assert cost["total_at_p90"] == pytest.approx(20 * 0.05)
    assert plan["forecast"]["wall_seconds"]["waves"] == 10

    text = cli(args, home)
    assert text.returncode == 0, text.stderr
    assert "← smallest meeting the target" in text.stdout
    assert "cost: $0.70 at the pilot's median run" in text.stdout

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
    assert section["chosen_design"]["tasks"] == 10
    assert section["target"]["effect"] == 0.10 and section["assumptions"]

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
                                          (["--tasks", "ten"], "--tasks")])
def test_bad_plan_input_is_one_line(tmp_path, fixture_copies, flags, field):
    home = tmp_path / "home"
    insert_pilot(home / "evalq.db", "p", [{"task": "a", "condition": "good",
                                           "attempts": [{"outcome": "correct"}]}])
    main = manifest(tmp_path / "main", fixture_copies, "main", repetitions=3)
    proc = cli(["plan", str(main), "--pilot", "p", "--simulations", "100", *flags],
               {"EVALQ_HOME": str(home)})
    assert f"field '{field}'" in one_line_error(proc)
