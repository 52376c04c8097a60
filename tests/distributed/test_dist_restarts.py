"""The study's own Redis (and PostgreSQL) going away while trials run.

* Sixty trials while Redis and then PostgreSQL restart; then resubmit. Both servers are private
  to the test (free ports, tmp dirs): Redis runs without persistence, so its restart loses
  every queued message and the launcher must re-send from the database. A third of the trials
  fail their first attempt with an infrastructure failure; `resubmit` completes them and the
  report shows first-attempt and eventual figures.
* Redis down for over a minute, as deployed (a password, an append-only file), while agents
  run and results flow: no trial is lost, doubled or failed.
"""

from __future__ import annotations

import json
import subprocess
import time

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


#: how long the broker stays away: longer than a minute, the outage every hop must ride out
OUTAGE_SECONDS = 65
SLOW_AGENT_SECONDS = 30  # in the agent phase when Redis stops, done while it is still away


def _phases(db_url: str) -> dict[str, int]:
    rows = attempts_table(db_url)
    return {"finished": sum(r["outcome"] is not None for r in rows),
            "slow_running": sum(r["state"] == "running" and r["condition"].endswith("slow")
                                for r in rows),
            "grading_claimed": sum(r["state"] == "grading" and r["outcome"] is None and
                                   (r["lease_owner"] or "").startswith("grader:") for r in rows)}


def test_a_redis_outage_of_over_a_minute_loses_no_trial(tmp_path, fixture_copies, postgres_url):
    """Redis (with a password and an append-only file, as deployed) is stopped while agents run
    and results flow, and started again on the same port OUTAGE_SECONDS later: every trial ends
    with its scripted outcome, once, and no log or output shows the password."""
    import secrets

    password = secrets.token_hex(16)
    redis_server = RedisServer(free_port(), tmp_path, password=password, persistent=True).start()
    procs = Procs(tmp_path)
    try:
        env = evalq_env({"EVALQ_HOME": str(tmp_path / "home"),
                         "EVALQ_BROKER_URL": redis_server.url, "EVALQ_DATABASE_URL": postgres_url,
                         "EVALQ_ARTIFACTS_URL": str(tmp_path / "shared-artifacts")})
        conditions = "".join(condition(
            f"{kind}-{speed}", f'{{ action = "solution", solution = "{solution}", '
                               f'seconds = {seconds} }}')
            for kind, solution in (("good", "correct"), ("bad", "incorrect"))
            for speed, seconds in (("fast", 1), ("slow", SLOW_AGENT_SECONDS)))
        study = write_big_study(tmp_path / "study", fixture_copies, "outage", conditions, 2,
                                wall=300)
        procs.worker("agent-a", "host-a", "agents", env, concurrency=4)
        procs.worker("agent-b", "host-b", "agents", env, concurrency=4)
        procs.worker("grader", "host-c", "grading", env)
        procs.worker("results", "host-d", "results", env)
        launcher = procs.start("launcher", [*EVALQ, "run", str(study)], env)

        wait_for(lambda: (lambda p: p["finished"] >= 1 and p["slow_running"] >= 2 and
                          p["grading_claimed"] >= 1)(_phases(postgres_url)), 180,
                 "a finished trial, a grading under way and slow agents running")
        redis_server.stop()
        down = time.monotonic()
        time.sleep(OUTAGE_SECONDS)  # the outage itself: a length of time, not a wait for a state
        during = _phases(postgres_url)
        redis_server.start()  # same port, same append-only file
        assert time.monotonic() - down >= 60
        assert launcher.wait(360) == 0, procs.logs()
        rows = attempts_table(postgres_url)
    finally:
        procs.stop_all()
        redis_server.stop()

    assert during["slow_running"] == 0, during  # the slow agents ended while Redis was away
    assert len(rows) == 16 and len({r["trial_id"] for r in rows}) == 16, rows
    assert {r["attempt"] for r in rows} == {1}, rows  # none lost and re-run, none doubled
    expected = {"good": "correct", "bad": "incorrect"}
    wrong = [r for r in rows if r["outcome"] != expected[r["condition"].split("-")[0]]]
    assert not wrong, wrong
    assert all(not r["regrades"] for r in rows), rows
    agents = procs.log("agent-a") + procs.log("agent-b")
    assert "broker unreachable" in agents and "broker reachable again" in agents, agents[-3000:]
    results = procs.log("results")
    assert "broker unreachable" in results and "broker reachable again" in results, results[-3000:]
    for name in procs.procs:
        assert password not in procs.log(name), f"{name}'s output shows the Redis password"
