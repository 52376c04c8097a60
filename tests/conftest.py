"""Shared test helpers: real services (Redis, PostgreSQL) and frozen fixture copies.

A test that needs a service that is not running fails and says how to start it; nothing is
skipped silently.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
EVALQ = [sys.executable, "-m", "evalq.cli.__main__"]

REDIS_HOW = ("start it with: redis-server --daemonize yes --bind 127.0.0.1 --port 6379 "
             "--save '' --appendonly no")
POSTGRES_HOW = ("start it with: pg_ctlcluster --skip-systemctl-redirect "
                "$(ls /etc/postgresql) main start")


def port_open(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((host, port)) == 0


def require_service(host: str, port: int, name: str, how: str) -> None:
    if not port_open(host, port):
        pytest.fail(f"{name} is not reachable at {host}:{port}; {how}", pytrace=False)


@pytest.fixture
def redis_url():
    """A Redis database of its own on the machine's Redis, emptied before use."""
    require_service("127.0.0.1", 6379, "Redis", REDIS_HOW)
    import redis

    # sessions running side by side set their own; pytest-xdist's workers (gw0, gw1, ...)
    # count down from it, each to a database of its own
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    db = int(os.environ.get("EVALQ_TEST_REDIS_DB", "13")) - worker
    client = redis.Redis(host="127.0.0.1", port=6379, db=db)
    client.flushdb()
    yield f"redis://127.0.0.1:6379/{db}"
    client.flushdb()


@pytest.fixture
def postgres_url():
    """A fresh PostgreSQL database, dropped afterwards."""
    require_service("127.0.0.1", 5432, "PostgreSQL", POSTGRES_HOW)
    import psycopg2

    name = f"evalq_test_{uuid.uuid4().hex[:10]}"
    admin = psycopg2.connect(host="127.0.0.1", port=5432, user="postgres", dbname="test")
    admin.autocommit = True
    admin.cursor().execute(f'CREATE DATABASE "{name}"')
    yield f"postgresql+psycopg2://postgres@127.0.0.1:5432/{name}"
    from evalq.results.store import get_engine

    get_engine.cache_clear()
    admin.cursor().execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.close()


def copy_fixture(name: str, dest_root: Path) -> Path:
    """A copy of a shipped fixture, re-frozen, so a test may change it freely."""
    from evalq.fixtures.fixture import freeze_fixture

    dest = dest_root / name
    shutil.copytree(FIXTURES / name, dest)
    freeze_fixture(dest)
    return dest


PY_FIXTURES = ("py-slugify-bugfix", "py-inventory-feature")


@pytest.fixture
def fixture_copies(tmp_path) -> Path:
    root = tmp_path / "fixtures"
    root.mkdir()
    for name in PY_FIXTURES:
        copy_fixture(name, root)
    return root


def pad_with_files(fixture: Path, total: int) -> None:
    """Add small files to a fixture's workspace until the fixture holds `total` files."""
    present = sum(1 for p in fixture.rglob("*") if p.is_file())
    extra = fixture / "workspace" / "extra"
    extra.mkdir()
    for i in range(total - present):
        (extra / f"f{i}.txt").write_text("x\n")
    assert sum(1 for p in fixture.rglob("*") if p.is_file()) == total


def write_study(folder: Path, fixtures_dir: Path, *, study_id: str = "t", repetitions: int = 2,
                seed: int = 7, extra_conditions: str = "", wall: int = 120,
                pause: float | None = None) -> Path:
    """A two-condition scripted study ("good" applies the correct references, "bad" the
    incorrect ones); `pause` makes each agent think that many seconds first."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "study.toml"
    thinking = f", seconds = {pause}" if pause else ""
    fixture_list = ", ".join(f'"{(fixtures_dir / n).as_posix()}"' for n in PY_FIXTURES)
    path.write_text(f'''
id = "{study_id}"
fixtures = [{fixture_list}]
repetitions = {repetitions}
seed = {seed}

[budgets]
wall_seconds = {wall}

[[conditions]]
name = "good"
agent = "scripted"
settings = {{ action = "solution", solution = "correct"{thinking} }}

[[conditions]]
name = "bad"
agent = "scripted"
settings = {{ action = "solution", solution = "incorrect"{thinking} }}
{extra_conditions}
''')
    return path


def cli_env(env_extra: dict | None = None) -> dict[str, str]:
    """This process's environment without any EVALQ_ setting, plus the test's own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVALQ_")}
    env.update(env_extra or {})
    return env


def start_cli(args: list[str], env_extra: dict | None = None, **popen) -> subprocess.Popen:
    """`evalq ARGS` in the background (a study the test acts on while it runs)."""
    return subprocess.Popen([*EVALQ, *args], env=cli_env(env_extra), **popen)


def run_cli(args: list[str], env_extra: dict | None = None, cwd: Path | None = None,
            timeout: float = 300, wrap=None) -> subprocess.CompletedProcess:
    """`evalq ARGS`; `wrap` turns the command line into another (e.g. without a capability)."""
    env = cli_env(env_extra)
    argv = [*EVALQ, *args]
    return subprocess.run(wrap(argv) if wrap else argv, env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)
