"""The servers a benchmark run needs, each started (or created) by the run and removed after it.

Its own redis-server on a free port (never the machine's shared one), a fresh PostgreSQL
database when the server answers (else a SQLite file, said so in the results), and evalq or
Celery worker processes whose readiness is read from their logs.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1]
PG = dict(host="127.0.0.1", port=5432, user="postgres", dbname="test")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(condition, timeout: float, what: str, poll: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(poll)
    raise RuntimeError(f"timed out after {timeout:.0f}s waiting for {what}")


@contextmanager
def redis_server(workdir: Path) -> Iterator[str]:
    """A private redis-server (no persistence) on a free loopback port; yields its URL."""
    if shutil.which("redis-server") is None:
        raise RuntimeError("redis-server is not installed: apt-get install -y redis-server")
    port = free_port()
    folder = workdir / f"redis-{port}"
    folder.mkdir(parents=True)
    proc = subprocess.Popen(["redis-server", "--bind", "127.0.0.1", "--port", str(port),
                             "--save", "", "--appendonly", "no", "--dir", str(folder)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        import redis

        client = redis.Redis(host="127.0.0.1", port=port)

        def up() -> bool:
            try:
                return bool(client.ping())
            except redis.ConnectionError:
                return False

        wait_for(up, 20, f"redis-server on port {port}")
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(10)


def postgres_available() -> bool:
    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((PG["host"], PG["port"])) == 0


@contextmanager
def database(workdir: Path, kind: str) -> Iterator[tuple[str, str]]:
    """(url, description): a fresh PostgreSQL database, or a SQLite file when asked or needed."""
    if kind == "postgres" and not postgres_available():
        raise RuntimeError("PostgreSQL is not reachable at 127.0.0.1:5432; start it with "
                           "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main "
                           "start, or run with --database sqlite")
    if kind == "sqlite":
        path = workdir / f"bench-{uuid.uuid4().hex[:8]}.db"
        yield f"sqlite:///{path}", "SQLite (WAL) file"
        return
    import psycopg2

    name = f"evalq_bench_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect(**PG)
    admin.autocommit = True
    admin.cursor().execute(f'CREATE DATABASE "{name}"')
    url = f"postgresql+psycopg2://postgres@127.0.0.1:5432/{name}"
    try:
        yield url, "PostgreSQL"
    finally:
        from evalq.results.store import get_engine

        get_engine(url).dispose()
        get_engine.cache_clear()
        admin.cursor().execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def child_env(settings: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALQ_")}
    env.update(settings)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


class Workers:
    """Worker processes, one per (queues, concurrency) entry, stopped by their own pids."""

    def __init__(self, logdir: Path):
        self.logdir = logdir
        self.procs: list[tuple[subprocess.Popen, Path]] = []

    def start(self, argv: list[str], env: dict[str, str], name: str) -> None:
        log = self.logdir / f"{name}.log"
        handle = open(log, "wb")
        proc = subprocess.Popen(argv, env=env, stdout=handle, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd=ROOT)
        self.procs.append((proc, log))

    def wait_ready(self, timeout: float = 90) -> None:
        def ready() -> bool:
            for proc, log in self.procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"worker exited early; see {log}:\n"
                                       + log.read_text(errors="replace")[-2000:])
            return all(b" ready." in log.read_bytes() for _, log in self.procs)

        wait_for(ready, timeout, "workers to log 'ready.'", poll=0.1)

    def stop(self, grace: float = 20) -> None:
        for proc, _ in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc, _ in self.procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.procs.clear()


def evalq_worker_argv(queues: str, concurrency: int, hostname: str) -> list[str]:
    return [sys.executable, "-m", "evalq.cli.__main__", "worker", "--queues", queues,
            "--concurrency", str(concurrency), "--hostname", hostname, "--loglevel", "INFO"]


def celery_worker_argv(app: str, queues: str, concurrency: int, hostname: str) -> list[str]:
    return [sys.executable, "-m", "celery", "-A", app, "worker", "-Q", queues, "-c",
            str(concurrency), "-P", "prefork", "-n", hostname, "-l", "INFO", "-E"]
