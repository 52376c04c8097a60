"""An agent worker dies after Redis handed it a run_trial message and before it claimed the trial.

Redis keeps such a message in kombu's unacked hash until the visibility timeout (hours, sized
to the longest trial) runs out. The launcher's sweep sees a message delivered more than a
lease ago whose attempt is still queued and sends the trial again, so the study finishes in
seconds instead of waiting for the timeout.

The dying worker is a real kombu consumer on the study's own Redis that takes one message
without acknowledging it and exits at once (as a SIGKILLed or out-of-memory worker would).
"""

from __future__ import annotations

import json
import subprocess
import sys

import redis

from conftest import EVALQ
from dist_support import (Procs, RedisServer, attempts_table, condition, evalq_env, free_port,
                          status_json, wait_for, write_big_study)

TAKE_AND_DIE = """
import json, os, sys
from kombu import Connection
with Connection(sys.argv[1]) as connection:
    message = connection.default_channel.basic_get(queue="agents", no_ack=False)
    print(json.dumps(message.decode() if message is not None else None), flush=True)
    os._exit(0)  # no ack, no restore: the message stays in the unacked hash
"""


def test_message_taken_by_a_worker_that_died_before_claiming(tmp_path, fixture_copies,
                                                            postgres_url):
    redis_server = RedisServer(free_port(), tmp_path).start()
    procs = Procs(tmp_path)
    env = evalq_env({"EVALQ_HOME": str(tmp_path / "home"), "EVALQ_BROKER_URL": redis_server.url,
                     "EVALQ_DATABASE_URL": postgres_url,
                     "EVALQ_ARTIFACTS_URL": str(tmp_path / "artifacts"),
                     "EVALQ_LEASE_SECONDS": "3",
                     # the broker alone would hand the message back only after an hour
                     "EVALQ_VISIBILITY_TIMEOUT": "3600"})
    study = write_big_study(tmp_path / "study", fixture_copies, "held",
                            condition("good", '{ action = "solution", solution = "correct" }'), 1)
    client = redis.Redis.from_url(redis_server.url)
    try:
        launcher = procs.start("launcher", [*EVALQ, "run", str(study)], env)
        wait_for(lambda: client.llen("agents") == 2, 60, "the launcher to send both trials")
        taken = subprocess.run([sys.executable, "-c", TAKE_AND_DIE, redis_server.url],
                               capture_output=True, text=True, timeout=60)
        assert taken.returncode == 0, taken.stderr
        held_trial = json.loads(taken.stdout)[0][0]["trial_id"]  # body: [args, kwargs, embed]
        assert client.hlen("unacked") == 1 and client.llen("agents") == 1
        procs.worker("agents", "host-a", "agents", env)
        procs.worker("grader", "host-c", "grading,results", env)
        launcher.wait(150)
        assert launcher.returncode == 0, procs.logs()
        status = status_json(env, "held")
        assert status["finished"] == 2, status
        rows = attempts_table(postgres_url)
    except (AssertionError, subprocess.TimeoutExpired) as exc:
        raise AssertionError(f"{exc}\n{procs.logs()}") from None
    finally:
        procs.stop_all()
        client.close()
        redis_server.stop()
    held = next(r for r in rows if r["trial_id"] == held_trial)
    # run once, by the live worker, from the re-sent message; the dead one never claimed it
    assert held["claims"] == 1 and held["outcome"] == "correct", held
    assert "re-sending 1 trial(s) whose worker is gone" in procs.log("launcher"), \
        procs.log("launcher")
