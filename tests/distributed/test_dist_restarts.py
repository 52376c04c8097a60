"""Sixty trials while the study's own Redis and then its own PostgreSQL restart; then resubmit.

Both servers are private to the test (free ports, tmp dirs): Redis runs without persistence,
so its restart loses every queued message and the launcher must re-send from the database.
A third of the trials fail their first attempt with an infrastructure failure; `resubmit`
completes them and the report shows first-attempt and eventual figures.
"""

from __future__ import annotations

import json
import subprocess

from conftest import EVALQ
from dist_support import (PostgresServer, Procs, RedisServer, assert_adds_up, attempts_table,
                          condition, evalq_env, free_port, status_json, wait_for,
                          write_big_study)


def test_redis_and_postgres_restarts_then_resubmit(tmp_path, fixture_copies):
    redis_server = RedisServer(free_port(), tmp_path).start()
    postgres = PostgresServer(free_port(), tmp_path / "pg")
    procs = Procs(tmp_path)
    try:
        postgres.start()
        settings = {"EVALQ_HOME": str(tmp_path / "home"), "EVALQ_BROKER_URL": redis_server.url,
                    "EVALQ_DATABASE_URL": postgres.url,
                    "EVALQ_ARTIFACTS_URL": str(tmp_path / "shared-artifacts"),
                    "EVALQ_LEASE_SECONDS": "3"}
        env = evalq_env(settings)
        conditions = (condition("good", '{ action = "solution", solution = "correct" }')
                      + condition("bad", '{ action = "solution", solution = "incorrect" }')
                      + condition("flaky", '{ action = "infra_fail", fail_attempts = 1 }'))
        study = write_big_study(tmp_path / "study", fixture_copies, "restarts", conditions, 10)
        procs.worker("agent-a", "host-a", "agents", env)
        procs.worker("agent-b", "host-b", "agents", env)
        procs.worker("grader", "host-c", "grading,results", env, concurrency=2)
        launcher = procs.start("launcher", [*EVALQ, "run", str(study)], env)

        wait_for(lambda: status_json(env, "restarts")["finished"] >= 8, 120,
                 "8 finished trials before the Redis restart")
        redis_server.stop()
        redis_server.start()  # same port, empty: every queued message is gone
        wait_for(lambda: status_json(env, "restarts")["finished"] >= 30, 150,
                 "30 finished trials after the Redis restart")
        postgres.restart()
        launcher.wait(240)
        # 1: the run ended, and some trials are infrastructure failures (by design, below)
        assert launcher.returncode == 1, procs.logs()

        after_run = status_json(env, "restarts")
        assert_adds_up(after_run)
        assert after_run["finished"] == 60
        assert after_run["by_outcome"]["infrastructure_failure"] == 20, after_run
        rows = attempts_table(postgres.url)
        assert len(rows) == 60 and len({r["trial_id"] for r in rows}) == 60

        done = subprocess.run([*EVALQ, "resubmit", "restarts", "--outcome",
                               "infrastructure_failure"], env=env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert "20 trial(s)" in done.stdout

        def all_second_attempts_done():
            status = status_json(env, "restarts")
            assert_adds_up(status)
            return status["finished"] == 60 and status["by_state"]["queued"] == 0 and \
                status["by_state"]["running"] == 0 and status["by_state"]["grading"] == 0 \
                and status["by_outcome"]["infrastructure_failure"] == 0 and status

        final = wait_for(all_second_attempts_done, 180, "the resubmitted attempts to finish")
        assert final["first_attempt_outcomes"]["infrastructure_failure"] == 20
        report = subprocess.run([*EVALQ, "report", "restarts", "--format", "json", "--out",
                                 str(tmp_path / "report.json")], env=env, capture_output=True,
                                text=True, timeout=120)
        assert report.returncode == 0, report.stderr
        rows = attempts_table(postgres.url)
        assert len(rows) == 80 and len({(r["trial_id"], r["attempt"]) for r in rows}) == 80
        assert {r["attempt"] for r in rows if r["condition"] == "flaky"} == {1, 2}
    finally:
        procs.stop_all()
        redis_server.stop()
        postgres.cleanup()

    data = json.loads((tmp_path / "report.json").read_text())
    flaky = data["conditions"]["flaky"]
    assert flaky["first_attempt"]["outcomes"]["infrastructure_failure"] == 20
    assert flaky["outcomes"]["infrastructure_failure"] == 0
    assert flaky["outcomes"]["incorrect"] == 20  # an infra_fail agent changes nothing
    assert data["conditions"]["good"]["outcomes"]["correct"] == 20
