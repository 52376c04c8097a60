"""Sixty trials over the machine's Redis and PostgreSQL, workers on four named hosts.

One study shows: a short visibility timeout re-delivers long trials yet each runs once; every
message sent twice still gives one row; SIGKILL of a worker's main process and of a pool child
loses nothing and counts nothing twice; `status` always adds up; Flower lists workers and
queue lengths while the study runs; differing worker environments are flagged.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from conftest import EVALQ
from dist_support import (Procs, assert_adds_up, attempts_table, condition, evalq_env,
                          free_port, status_json, wait_for, write_big_study)

SLOW = 4.0


def _running_on(db_url: str, host: str, cond: str = "slow") -> dict | None:
    for row in attempts_table(db_url):
        if row["state"] == "running" and row["condition"] == cond and \
                (row["lease_owner"] or "").startswith(f"{host}:"):
            return row
    return None


def _http_json(url: str):
    with urllib.request.urlopen(url, timeout=20) as response:
        return json.loads(response.read())


def _swept_run_folders(runs: Path) -> list[str]:
    """Sweep what the study's killed workers left under `runs`; what is still there after."""
    from evalq.ops.run_folders import sweep_run_folders

    sweep_run_folders(runs)
    with open("/proc/mounts") as mounts:
        mounted = [line.split()[1] for line in mounts if str(runs) in line]
    return mounted + [p.name for p in runs.glob("evalq-run-*")] if runs.exists() else mounted


def test_sixty_trials_survive_kills_duplicates_and_short_visibility(
        tmp_path, fixture_copies, redis_url, postgres_url):
    settings = {"EVALQ_HOME": str(tmp_path / "home"), "EVALQ_BROKER_URL": redis_url,
                "EVALQ_DATABASE_URL": postgres_url,
                "EVALQ_ARTIFACTS_URL": str(tmp_path / "shared-artifacts"),
                "EVALQ_LEASE_SECONDS": "3", "EVALQ_VISIBILITY_TIMEOUT": "2"}
    env = evalq_env(settings)
    conditions = (condition("good", '{ action = "solution", solution = "correct" }')
                  + condition("bad", '{ action = "solution", solution = "incorrect" }')
                  + condition("slow", f'{{ action = "sleep", seconds = {SLOW} }}'))
    study = write_big_study(tmp_path / "study", fixture_copies, "dist60", conditions, 10)
    procs = Procs(tmp_path)
    try:
        for name, host in (("agent-a", "host-a"), ("agent-b", "host-b"),
                           ("agent-d", "host-d")):
            procs.worker(name, host, "agents", env)
        procs.worker("grader", "host-c", "grading,results", env, concurrency=2)
        flower_port = free_port()
        procs.start("flower", [*EVALQ, "flower", "--port", str(flower_port),
                               "--unauthenticated-api"], env)
        launcher = procs.start("launcher", [*EVALQ, "run", str(study)], env)
        wait_for(lambda: status_json(env, "dist60")["attempts"] >= 60, 90,
                 "the launcher to create 60 attempts")
        # every run_trial message a second time: a re-delivery must not make a second row
        again = subprocess.run([*EVALQ, "run", str(study), "--resume", "--no-wait"], env=env,
                               capture_output=True, text=True, timeout=120)
        assert again.returncode == 0, again.stderr

        # Flower sees every worker and the three queues while the study runs
        base = f"http://127.0.0.1:{flower_port}/api"
        workers = wait_for(lambda: (lambda w: w if {"agent-a@host-a", "agent-b@host-b",
                                                     "grader@host-c"} <= set(w) else None)(
            _http_json(f"{base}/workers?status=1")), 60, "Flower to list the workers")
        assert workers.get("agent-d@host-d") is True, workers
        # Flower lists the queues its workers answered its inspect broadcast with; one
        # answering late is missing from that reply until Flower asks again (refresh)
        def three_queues():
            _http_json(f"{base}/workers?refresh=1")
            q = _http_json(f"{base}/queues/length")
            return q if {"agents", "grading", "results"} <= {
                x["name"] for x in q["active_queues"]} else None

        queues = wait_for(three_queues, 120, "Flower to list the three queues")
        assert all(isinstance(q["messages"], int) for q in queues["active_queues"])

        # SIGKILL the main process of host-a's worker in the middle of a slow trial
        killed_main = wait_for(lambda: _running_on(postgres_url, "host-a"), 120,
                               "host-a to run a slow trial")
        os.kill(procs.procs["agent-a"].pid, signal.SIGKILL)
        procs.worker("agent-e", "host-e", "agents", env)
        # SIGKILL the pool child running host-b's slow trial (its pid is in the lease owner)
        killed_child = wait_for(lambda: _running_on(postgres_url, "host-b"), 120,
                                "host-b to run a slow trial")
        os.kill(int(killed_child["lease_owner"].split(":")[1]), signal.SIGKILL)

        snapshots = []
        while launcher.poll() is None:
            snapshot = status_json(env, "dist60")
            assert_adds_up(snapshot)
            snapshots.append(snapshot)
            assert len(snapshots) < 400, "the study did not finish\n" + procs.logs()
            time.sleep(0.5)
        assert launcher.returncode == 0, procs.logs()
    finally:
        procs.stop_all()
        leftover = _swept_run_folders(tmp_path / "home" / "runs")

    # the killed trials' run folders (size-capped tmpfs mounts when run as root) outlive their
    # workers until an agent worker's sweep on this host (at start, then every 10 minutes);
    # this one leaves nothing, and nothing mounted
    assert leftover == [], leftover
    rows = attempts_table(postgres_url)
    assert len(rows) == 60 and len({r["trial_id"] for r in rows}) == 60, rows
    assert all(r["outcome"] is not None and r["state"] == "done" for r in rows)
    killed = {killed_main["trial_id"], killed_child["trial_id"]}
    for row in rows:
        expected = {"good": "correct", "bad": "incorrect", "slow": "incorrect"}[row["condition"]]
        if row["trial_id"] in killed:
            assert row["outcome"] in (expected, "infrastructure_failure"), row
        else:
            assert row["outcome"] == expected, row
            assert row["claims"] == 1, f"ran more than once: {row}"
    # the 4 s trials outlived the 2 s visibility timeout: Redis re-delivered them (and the
    # duplicate messages), and the re-deliveries found the live lease or the finished row
    worker_logs = "".join(procs.log(n) for n in ("agent-a", "agent-b", "agent-d", "agent-e"))
    assert "leased by" in worker_logs, worker_logs[-3000:]
    assert "already finished" in worker_logs or "attempt is grading" in worker_logs
    # snapshots were taken while the launcher ran, so the last may predate the final result;
    # progress never goes backwards, and once the launcher has exited every trial is finished
    finished = [s["finished"] for s in snapshots]
    assert len(snapshots) > 3 and finished == sorted(finished), finished
    hosts = {r["worker_host"] for r in rows}
    assert hosts <= {"host-a", "host-b", "host-d", "host-e"} and len(hosts) >= 3, hosts

    final = status_json(env, "dist60")
    assert_adds_up(final)
    assert final["finished"] == 60, final
    assert final["by_outcome"]["correct"] + final["by_outcome"]["incorrect"] >= 58
    assert final["environments"] is None

    # one attempt under a different Python: `status` names the differing field
    from sqlalchemy import create_engine, text

    engine = create_engine(postgres_url)
    with engine.begin() as conn:
        conn.execute(text("update attempts set worker_env = jsonb_set(worker_env::jsonb, "
                          "'{python}', '\"3.99.0\"')::json where id = (select min(id) from "
                          "attempts)"))
    engine.dispose()
    text_status = subprocess.run([*EVALQ, "status", "dist60"], env=env, capture_output=True,
                                 text=True, timeout=60)
    assert "worker environments differ in python" in text_status.stdout, text_status.stdout
    assert "3.99.0" in text_status.stdout
