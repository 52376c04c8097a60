"""Operator commands: `run --dry-run` writes nothing, `run --limit` is a smoke run under its own
id, `studies` lists planned/finished counts, and every command takes -v/--log-level."""

from __future__ import annotations

import json

from conftest import run_cli, write_study


def test_dry_run_limit_and_studies(tmp_path, fixture_copies):
    home = tmp_path / "home"
    env = {"EVALQ_HOME": str(home)}
    study = write_study(tmp_path / "study", fixture_copies, study_id="ops", repetitions=2)

    dry = run_cli(["run", str(study), "--dry-run"], env)
    assert dry.returncode == 0, dry.stderr
    order = [line.split()[-1] for line in dry.stdout.splitlines()
             if line.strip()[:1].isdigit()]
    assert len(order) == 8 and len(set(order)) == 8
    assert "nothing was enqueued or written" in dry.stdout
    assert not home.exists() and not (study.parent / "study.lock.json").exists()

    smoke = run_cli(["run", str(study), "--limit", "3", "-v"], env, timeout=300)
    assert smoke.returncode == 0, smoke.stderr
    assert "INFO" in smoke.stderr  # -v turned evalq's info logging on

    listed = run_cli(["studies", "--json", "--log-level", "warning"], env)
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert [(r["study"], r["planned"], r["finished"], r["smoke_of"]) for r in rows] == \
        [("ops.smoke3", 3, 3, "ops")]
    status = json.loads(run_cli(["status", "ops.smoke3", "--json"], env).stdout)
    smoke_trials = sorted(status["by_outcome"].values())
    assert sum(smoke_trials) == 3
    # the smoke run is the head of the planned order, under its own id
    from sqlalchemy import create_engine, text

    engine = create_engine(f"sqlite:///{home / 'evalq.db'}")
    with engine.connect() as conn:
        ids = [r[0] for r in conn.execute(text("select id from trials order by order_index"))]
    engine.dispose()
    assert ids == [t.replace("ops/", "ops.smoke3/", 1) for t in order[:3]]
    watched = run_cli(["status", "ops.smoke3", "--watch", "--interval", "0.2"], env, timeout=60)
    assert watched.returncode == 0 and "3/3 trials finished" in watched.stdout, watched.stderr
    text_listing = run_cli(["studies"], env).stdout
    assert "smoke run of ops" in text_listing and "3/3" in text_listing
