"""No password in anything evalq prints: `evalq run`, the workers' start-up, `evalq status`,
`evalq flower`, error messages that quote a URL, and log lines.

The broker is a private Redis with a password; the database URL carries the same password
(the machine's PostgreSQL trusts local connections, so it is sent and ignored).
"""

from __future__ import annotations

import secrets
import subprocess

from conftest import EVALQ, write_study
from dist_support import Procs, RedisServer, evalq_env, free_port, wait_for


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([*EVALQ, *args], env=env, capture_output=True, text=True, timeout=120)


def test_no_command_prints_a_password(tmp_path, fixture_copies, postgres_url):
    secret = secrets.token_hex(16)
    redis_server = RedisServer(free_port(), tmp_path, password=secret).start()
    database = postgres_url.replace("postgres@", f"postgres:{secret}@", 1)
    env = evalq_env({"EVALQ_HOME": str(tmp_path / "home"), "EVALQ_BROKER_URL": redis_server.url,
                     "EVALQ_DATABASE_URL": database})
    study = write_study(tmp_path / "study", fixture_copies, study_id="pw", repetitions=1)
    procs = Procs(tmp_path)
    shown: dict[str, str] = {}
    try:
        procs.worker("agents", "host-a", "agents", env)
        procs.worker("results", "host-r", "results", env)
        procs.start("flower", [*EVALQ, "flower", "--port", str(free_port())], env)
        for name, line in (("agents", "ready."), ("results", "ready."), ("flower", "Broker")):
            wait_for(lambda: line in procs.log(name), 90, f"{name}'s '{line}' line")

        run = _run(["run", str(study), "--no-wait", "-v"], env)
        assert run.returncode == 0, run.stderr
        assert f"broker {redis_server.url.replace(secret, '***')}" in run.stderr, run.stderr
        shown["run"] = run.stdout + run.stderr
        status = _run(["status", "pw", "-v"], env)
        assert status.returncode == 0, status.stderr
        shown["status"] = status.stdout + status.stderr

        no_host = _run(["status", "pw"], dict(env, EVALQ_BROKER_URL=f"redis://:{secret}@/0"))
        assert no_host.returncode == 2 and "redis://:***@/0" in no_host.stderr, no_host.stderr
        shown["broker URL without a host"] = no_host.stdout + no_host.stderr
        wrong = _run(["run", str(study), "--no-wait"],
                     dict(env, EVALQ_BROKER_URL=redis_server.url.replace(secret, secret[::-1])))
        assert wrong.returncode == 2 and "EVALQ_BROKER_URL" in wrong.stderr, wrong.stderr
        shown["a wrong broker password"] = wrong.stdout + wrong.stderr
        nowhere = _run(["run", str(study), "--no-wait"], dict(
            env, EVALQ_DATABASE_URL=f"postgresql://postgres:{secret}@127.0.0.1:{free_port()}/x"))
        assert nowhere.returncode == 2 and "EVALQ_DATABASE_URL" in nowhere.stderr, \
            nowhere.stderr
        shown["an unreachable database"] = nowhere.stdout + nowhere.stderr
    finally:
        procs.stop_all()
        redis_server.stop()
    for name in procs.procs:
        shown[f"{name}'s output"] = procs.log(name)
    assert "redis://:**" in shown["flower's output"]  # it did print the broker, masked
    for what, text in shown.items():
        assert secret not in text, f"{what} shows the password:\n{text[-3000:]}"
