"""A worker on its own "host" (a network namespace) loses its link in the middle of a trial.

Each test creates its namespace and a veth pair in 10.231.47.0/30 (host side .1, namespace
side .2; nothing else uses it) and its own PostgreSQL (and Redis) listening on loopback and on
the host side of the link. Cutting the link strands the namespaced worker's trial; once its
lease expires it is taken again elsewhere, and the rest of the study finishes without waiting
for the lost host, even when the lost host was in the middle of a transaction on that trial.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from contextlib import contextmanager

from conftest import EVALQ
from dist_support import (PostgresServer, Procs, RedisServer, assert_adds_up, attempts_table,
                          condition, evalq_env, free_port, status_json, wait_for,
                          write_big_study)

HOST_IP, NS_IP = "10.231.47.1", "10.231.47.2"


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, f"ip {' '.join(args)}: {done.stderr}"


@contextmanager
def namespace_link():
    """(namespace, host-side device) of a fresh veth link; removed again on the way out."""
    tag = f"{os.getpid() % 100000}"
    ns, host_dev, ns_dev = f"evq{tag}", f"evqh{tag}", f"evqn{tag}"
    try:
        _ip("netns", "add", ns)
        _ip("link", "add", host_dev, "type", "veth", "peer", "name", ns_dev)
        _ip("link", "set", ns_dev, "netns", ns)
        _ip("addr", "add", f"{HOST_IP}/30", "dev", host_dev)
        _ip("link", "set", host_dev, "up")
        _ip("-n", ns, "addr", "add", f"{NS_IP}/30", "dev", ns_dev)
        _ip("-n", ns, "link", "set", ns_dev, "up")
        _ip("-n", ns, "link", "set", "lo", "up")
        yield ns, host_dev
    finally:
        subprocess.run(["ip", "link", "del", host_dev], capture_output=True, timeout=30)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
    assert ns not in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                    text=True).stdout


def namespaced_postgres(tmp_path) -> PostgresServer:
    return PostgresServer(free_port(), tmp_path / "pg", listen=f"127.0.0.1,{HOST_IP}",
                          extra_hba=(f"host all all {HOST_IP[:-1]}0/30 trust",))


#: run inside the namespace: lock a row through evalq's engine, say so, then go silent
HOLDER = """
import sys
from sqlalchemy import text
from evalq.results.store import get_engine
connection = get_engine(sys.argv[1]).connect()
connection.execute(text("UPDATE held SET n = n + 1 WHERE id = 1"))
print("locked", flush=True)
sys.stdin.read()
"""


def test_row_locked_by_a_lost_host_is_released(tmp_path):
    """The host drops off between its UPDATE and its COMMIT: the server ends that session
    within seconds (evalq asks it to probe silent peers), so another host's write of the same
    row goes through instead of waiting for the operating system's two-hour TCP keepalive."""
    from sqlalchemy import text

    from evalq.results.store import get_engine

    postgres = namespaced_postgres(tmp_path)
    holder = None
    with namespace_link() as (ns, host_dev):
        try:
            postgres.start()
            engine = get_engine(postgres.url)
            with engine.begin() as connection:
                connection.execute(text("CREATE TABLE held (id int PRIMARY KEY, n int)"))
                connection.execute(text("INSERT INTO held VALUES (1, 0)"))
            holder = subprocess.Popen(
                ["ip", "netns", "exec", ns, sys.executable, "-c", HOLDER,
                 postgres.url.replace("127.0.0.1", HOST_IP)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True)
            assert holder.stdout.readline().strip() == "locked", holder.stderr.read()
            _ip("link", "set", host_dev, "down")
            written = threading.Event()

            def write_same_row():
                with engine.begin() as connection:
                    connection.execute(text("UPDATE held SET n = n + 10 WHERE id = 1"))
                written.set()

            threading.Thread(target=write_same_row, daemon=True).start()
            # the probes give up after 10 + 3 x 5 s; the margin is for a loaded machine
            assert written.wait(120), "the lost host's lock was still held after 120 s"
            with engine.connect() as connection:
                assert connection.execute(text("SELECT n FROM held")).scalar() == 10
        finally:
            if holder is not None:
                holder.kill()
                holder.wait()
            get_engine(postgres.url).dispose()
            postgres.cleanup()


def test_worker_in_namespace_cut_off_mid_trial(tmp_path, fixture_copies):
    procs = Procs(tmp_path)
    redis_server = RedisServer(free_port(), tmp_path, binds=("127.0.0.1", HOST_IP))
    postgres = namespaced_postgres(tmp_path)
    with namespace_link() as (ns, host_dev):
        _run_cut_off_study(tmp_path, fixture_copies, procs, redis_server, postgres, ns,
                           host_dev)


def _run_cut_off_study(tmp_path, fixture_copies, procs, redis_server, postgres, ns, host_dev):
    try:
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
    except (AssertionError, subprocess.TimeoutExpired) as exc:
        raise AssertionError(f"{exc}\n{procs.logs()}") from None
    finally:
        procs.stop_all()
        redis_server.stop()
        postgres.cleanup()

    assert len(rows) == 60 and all(r["outcome"] is not None for r in rows)
    recovered = next(r for r in rows if r["trial_id"] == stranded["trial_id"])
    assert recovered["claims"] >= 2, recovered  # taken again after the lease expired
    assert recovered["worker_host"] == "host-a" and recovered["outcome"] == "incorrect"
    others = [r for r in rows if r["trial_id"] != stranded["trial_id"]]
    assert all(r["outcome"] == ("correct" if r["condition"] == "good" else "incorrect")
               for r in others), others
