"""The same study through the real Redis broker and `evalq worker` processes, into PostgreSQL."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import psycopg2

from conftest import EVALQ, run_cli, write_study


def _start_worker(env, queues, name, log):
    return subprocess.Popen([*EVALQ, "worker", "--queues", queues, "--concurrency", "1",
                             "--hostname", name, "--loglevel", "WARNING"], env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def test_study_through_redis_and_workers(tmp_path, fixture_copies, redis_url, postgres_url):
    home = tmp_path / "home"
    settings = {"EVALQ_HOME": str(home), "EVALQ_BROKER_URL": redis_url,
                "EVALQ_DATABASE_URL": postgres_url,
                "EVALQ_ARTIFACTS_URL": str(tmp_path / "shared-artifacts")}
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALQ_")}
    env.update(settings)
    study = write_study(tmp_path / "study", fixture_copies, study_id="viaredis", repetitions=2)
    log = open(tmp_path / "workers.log", "wb")
    workers = [_start_worker(env, "agents", "agent1@host-a", log),
               _start_worker(env, "agents", "agent2@host-b", log),
               _start_worker(env, "grading,results", "grader1@host-c", log)]
    try:
        proc = run_cli(["run", str(study)], settings, timeout=300)
        assert proc.returncode == 0, proc.stderr + (tmp_path / "workers.log").read_text()
        assert "broker redis://" in proc.stderr
    finally:
        for worker in workers:
            os.killpg(worker.pid, signal.SIGTERM)
        for worker in workers:
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()
    report_path = [l for l in proc.stdout.splitlines() if l.endswith(".json")][0].split(": ")[1]
    report = json.loads(open(report_path).read())
    assert report["trials"] == {"planned": 8, "finished": 8, "pending": 0}
    assert report["conditions"]["good"]["outcomes"]["correct"] == 4
    assert report["conditions"]["bad"]["outcomes"]["incorrect"] == 4
    dbname = postgres_url.rsplit("/", 1)[1]
    with psycopg2.connect(host="127.0.0.1", user="postgres", dbname=dbname) as conn:
        cur = conn.cursor()
        cur.execute("select count(*), count(distinct trial_id) from attempts")
        assert cur.fetchone() == (8, 8)
        cur.execute("select distinct worker_host from attempts")
        hosts = {row[0] for row in cur.fetchall()}
    assert hosts <= {"host-a", "host-b"} and hosts, hosts
