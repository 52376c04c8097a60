"""Helpers for the distributed tests: private Redis/PostgreSQL servers, workers, launchers, polls.

Servers a test restarts or cuts off are its own, on free ports, in the test's tmp dir; the
machine's shared Redis and PostgreSQL are only used by tests that leave them running.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from conftest import EVALQ, PY_FIXTURES  # noqa: E402

PG_BIN = sorted(Path("/usr/lib/postgresql").glob("*/bin"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(condition: Callable[[], object], timeout: float, what: str, every: float = 0.2):
    """Poll `condition` until it returns something truthy; fail naming `what` on the deadline."""
    end = time.monotonic() + timeout
    last_error = None
    while time.monotonic() < end:
        try:
            value = condition()
            if value:
                return value
        except Exception as exc:  # a server coming back up: keep polling
            last_error = exc
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}"
                         + (f" (last error: {last_error})" if last_error else ""))


def port_open(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


# ------------------------------------------------------------------ private Redis
@dataclass
class RedisServer:
    port: int
    folder: Path
    binds: tuple[str, ...] = ("127.0.0.1",)
    proc: subprocess.Popen | None = None
    #: requirepass, as a deployment's Redis has one
    password: str | None = None
    #: an append-only file, as a deployment's Redis keeps its queues across a restart
    persistent: bool = False

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def start(self) -> "RedisServer":
        if shutil.which("redis-server") is None:
            raise AssertionError("redis-server is not installed; apt-get install redis-server")
        log = open(self.folder / "redis.log", "ab")
        extra = ["--requirepass", self.password] if self.password else []
        self.proc = subprocess.Popen(["redis-server", "--port", str(self.port), "--bind",
                                      *self.binds, "--save", "", "--appendonly",
                                      "yes" if self.persistent else "no", *extra,
                                      # other binds are only this test's private veth link
                                      "--protected-mode",
                                      "yes" if self.binds == ("127.0.0.1",) else "no",
                                      "--dir", str(self.folder)], stdout=log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(lambda: port_open("127.0.0.1", self.port), 15, "redis-server to listen")
        return self

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# ------------------------------------------------------------------ private PostgreSQL
@dataclass
class PostgresServer:
    port: int
    folder: Path
    listen: str = "127.0.0.1"
    extra_hba: tuple[str, ...] = ()

    @property
    def url(self) -> str:
        return f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}/evalq"

    def _as_postgres(self, argv: list[str]) -> subprocess.CompletedProcess:
        user = pwd.getpwnam("postgres")

        def demote():  # pragma: no cover - runs in the child
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)

        return subprocess.run(argv, preexec_fn=demote, capture_output=True, text=True,
                              timeout=120, env={"PATH": os.environ["PATH"], "LC_ALL": "C.UTF-8"})

    def _pg_ctl(self, *args: str) -> None:
        done = self._as_postgres([str(PG_BIN[-1] / "pg_ctl"), "-D", str(self.data), *args])
        assert done.returncode == 0, f"pg_ctl {args} failed: {done.stdout}{done.stderr}"

    def start(self) -> "PostgresServer":
        if not PG_BIN:
            raise AssertionError("PostgreSQL binaries missing; apt-get install postgresql")
        # pytest's tmp dirs are private to root; the server runs as `postgres`
        self.folder = Path(tempfile.mkdtemp(prefix="evalq-dist-pg-"))
        user = pwd.getpwnam("postgres")
        os.chown(self.folder, user.pw_uid, user.pw_gid)
        self.data = self.folder / "data"
        self.sockets = self.folder / "sock"
        self.sockets.mkdir(exist_ok=True)
        os.chown(self.sockets, user.pw_uid, user.pw_gid)
        done = self._as_postgres([str(PG_BIN[-1] / "initdb"), "-D", str(self.data), "-U",
                                  "postgres", "--auth=trust", "-E", "UTF8"])
        assert done.returncode == 0, done.stdout + done.stderr
        with open(self.data / "pg_hba.conf", "a") as hba:
            for line in self.extra_hba:
                hba.write(line + "\n")
        self._start()
        import psycopg2

        conn = psycopg2.connect(host="127.0.0.1", port=self.port, user="postgres",
                                dbname="postgres")
        conn.autocommit = True
        conn.cursor().execute("CREATE DATABASE evalq")
        conn.close()
        return self

    def _start(self) -> None:
        options = (f"-p {self.port} -k {self.sockets} -c listen_addresses='{self.listen}' "
                   "-c fsync=off -c full_page_writes=off -c max_connections=200")
        self._pg_ctl("-o", options, "-l", str(self.folder / "pg.log"), "-w", "-t", "60",
                     "start")

    def stop(self, mode: str = "fast") -> None:
        self._pg_ctl("-m", mode, "-w", "stop")

    def restart(self, down_seconds_until: Callable[[], bool] | None = None) -> None:
        self.stop("immediate")
        self._start()

    def cleanup(self) -> None:
        if hasattr(self, "data") and (self.data / "postmaster.pid").exists():
            try:
                self.stop("immediate")
            except AssertionError:
                pass
        shutil.rmtree(self.folder, ignore_errors=True)


# ------------------------------------------------------------------ evalq processes
def evalq_env(settings: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALQ_")}
    env.update(settings)
    return env


@dataclass
class Procs:
    """Processes a test started; all stopped (by their own pids) in `stop_all`."""
    folder: Path
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    def start(self, name: str, argv: list[str], env: dict[str, str],
              prefix: list[str] | None = None) -> subprocess.Popen:
        log = open(self.folder / f"{name}.log", "ab")
        proc = subprocess.Popen([*(prefix or []), *argv], env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        self.procs[name] = proc
        return proc

    def worker(self, name: str, host: str, queues: str, env: dict[str, str],
               concurrency: int = 1, prefix: list[str] | None = None) -> subprocess.Popen:
        return self.start(name, [*EVALQ, "worker", "--queues", queues, "--concurrency",
                                 str(concurrency), "--hostname", f"{name}@{host}",
                                 "--loglevel", "INFO"], env, prefix)

    def log(self, name: str) -> str:
        path = self.folder / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def logs(self) -> str:
        return "\n".join(f"----- {n}\n{self.log(n)[-3000:]}" for n in self.procs)

    def stop_all(self, grace: float = 10.0) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        end = time.monotonic() + grace
        for proc in self.procs.values():
            try:
                proc.wait(max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()


def write_big_study(folder: Path, fixtures_dir: Path, study_id: str, conditions: str,
                    repetitions: int, wall: int = 60) -> Path:
    """len(PY_FIXTURES) x conditions x repetitions trials of the scripted agent."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "study.toml"
    fixture_list = ", ".join(f'"{(fixtures_dir / n).as_posix()}"' for n in PY_FIXTURES)
    path.write_text(f'id = "{study_id}"\nfixtures = [{fixture_list}]\n'
                    f"repetitions = {repetitions}\nseed = 11\nmax_attempts = 4\n\n"
                    f"[budgets]\nwall_seconds = {wall}\n{conditions}")
    return path


CONDITION = '''
[[conditions]]
name = "{name}"
agent = "scripted"
settings = {settings}
'''


def condition(name: str, settings: str) -> str:
    return CONDITION.format(name=name, settings=settings)


def status_json(env: dict[str, str], study: str) -> dict:
    done = subprocess.run([*EVALQ, "status", study, "--json"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def assert_adds_up(status: dict) -> None:
    planned = status["planned"]
    assert sum(status["by_state"].values()) + sum(status["by_outcome"].values()) == planned, status
    assert sum(status["by_host"].values()) == planned, status
    assert all(status["checks"].values()), status


def attempts_table(db_url: str) -> list[dict]:
    from sqlalchemy import create_engine, text

    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("select a.trial_id, a.attempt, a.state, a.outcome, "
                                     "a.claims, a.worker_host, a.lease_owner, a.regrades, "
                                     "t.condition from attempts a join trials t "
                                     "on t.id = a.trial_id")).mappings().all()
            return [dict(r) for r in rows]
    finally:
        engine.dispose()
