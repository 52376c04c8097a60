"""A worker on its own "host" (a network namespace) loses its link in the middle of a trial.

The test creates the namespace and a veth pair in 10.231.47.0/30 (host side .1, namespace
side .2; nothing else uses it), starts its own Redis and PostgreSQL listening on loopback and
on the host side of the link, and runs one agent worker inside the namespace. Cutting the link
strands that worker's trial; once its lease expires it is taken again elsewhere, and the rest
of the study finishes without waiting for the lost host.
"""

from __future__ import annotations

import os
import subprocess

from conftest import EVALQ
from dist_support import (PostgresServer, Procs, RedisServer, assert_adds_up, attempts_table,
                          condition, evalq_env, free_port, status_json, wait_for,
                          write_big_study)

HOST_IP, NS_IP = "10.231.47.1", "10.231.47.2"


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, f"ip {' '.join(args)}: {done.stderr}"


def test_worker_in_namespace_cut_off_mid_trial(tmp_path, fixture_copies):
    tag = f"{os.getpid() % 100000}"
    ns, host_dev, ns_dev = f"evq{tag}", f"evqh{tag}", f"evqn{tag}"
    procs = Procs(tmp_path)
    redis_server = RedisServer(free_port(), tmp_path, binds=("127.0.0.1", HOST_IP))
    postgres = PostgresServer(free_port(), tmp_path / "pg", listen=f"127.0.0.1,{HOST_IP}",
                              extra_hba=(f"host all all {HOST_IP[:-1]}0/30 trust",))
    try:
        _ip("netns", "add", ns)
        _ip("link", "add", host_dev, "type", "veth", "peer", "name", ns_dev)
        _ip("link", "set", ns_dev, "netns", ns)
        _ip("addr", "add", f"{HOST_IP}/30", "dev", host_dev)
        _ip("link", "set", host_dev, "up")
        _ip("-n", ns, "addr", "add", f"{NS_IP}/30", "dev", ns_dev)
        _ip("-n", ns, "link", "set", ns_dev, "up")
        _ip("-n", ns, "link", "set", "lo", "up")
        redis_server.start()
        postgres.start()
        common = {"EVALQ_ARTIFACTS_URL": str(tmp_path / "shared-artifacts"),
                  "EVALQ_LEASE_SECONDS": "3"}
        env = evalq_env({**common, "EVALQ_HOME": str(tmp_path / "home"),
                         "EVALQ_BROKER_URL": redis_server.url,
                         "EVALQ_DATABASE_URL": postgres.url})
        ns_env = evalq_env({**common, "EVALQ_HOME": str(tmp_path / "home-ns"),
                            "EVALQ_BROKER_URL": f"redis://{HOST_IP}:{redis_server.port}/0",
                            "EVALQ_DATABASE_URL": postgres.url.replace("127.0.0.1", HOST_IP)})
        conditions = (condition("good", '{ action = "solution", solution = "correct" }')
                      + condition("bad", '{ action = "solution", solution = "incorrect" }')
                      + condition("slow", '{ action = "sleep", seconds = 3 }'))
        study = write_big_study(tmp_path / "study", fixture_copies, "netns", conditions, 10)
        procs.worker("agent-ns", "host-ns", "agents", ns_env,
                     prefix=["ip", "netns", "exec", ns])
        procs.worker("agent-a", "host-a", "agents", env)
        procs.worker("grader", "host-c", "grading,results", env, concurrency=2)
        launcher = procs.start("launcher", [*EVALQ, "run", str(study)], env)

        def ns_running():
            for row in attempts_table(postgres.url):
                if row["state"] == "running" and row["condition"] == "slow" and \
                        (row["lease_owner"] or "").startswith("host-ns:"):
                    return row
            return None

        stranded = wait_for(ns_running, 150, "the namespaced worker to run a slow trial")
        _ip("link", "set", host_dev, "down")  # the host drops off the network mid-trial
        launcher.wait(240)
        assert launcher.returncode == 0, procs.logs()
        status = status_json(env, "netns")
        assert_adds_up(status)
        assert status["finished"] == 60
        rows = attempts_table(postgres.url)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{procs.logs()}") from None
    finally:
        procs.stop_all()
        redis_server.stop()
        postgres.cleanup()
        subprocess.run(["ip", "link", "del", host_dev], capture_output=True, timeout=30)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)

    assert len(rows) == 60 and all(r["outcome"] is not None for r in rows)
    recovered = next(r for r in rows if r["trial_id"] == stranded["trial_id"])
    assert recovered["claims"] >= 2, recovered  # taken again after the lease expired
    assert recovered["worker_host"] == "host-a" and recovered["outcome"] == "incorrect"
    others = [r for r in rows if r["trial_id"] != stranded["trial_id"]]
    assert all(r["outcome"] == ("correct" if r["condition"] == "good" else "incorrect")
               for r in others), others
    assert ns not in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                    text=True).stdout
