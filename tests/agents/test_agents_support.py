"""Shared helpers for the agent tests: the real agent installs, scripts, studies, searches.

(Named test_agents_* so it lives beside the tests; it holds no tests of its own.)
"""

from __future__ import annotations

import gzip
import io
import json
import sqlite3
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from conftest import copy_fixture, run_cli  # noqa: E402

INSTALL = ROOT / "scripts" / "install-test-agents.sh"
#: a git identity and no user or system configuration, for the tests' own repositories
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
           "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}


def committed_folder(folder: Path) -> Path:
    """`folder` made a repository of its own with everything in it committed: an agent's
    folder as a user keeps it. Inside the checkout's git-ignored .pytest-tmp, a plain folder
    would give evalq no files to export (it leaves out what git ignores)."""
    import os

    def git(*args: str) -> None:
        done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True,
                              text=True, env={**os.environ, **GIT_ENV}, timeout=60)
        assert done.returncode == 0, done.stderr

    git("init", "-q")
    git("add", "-A")
    git("commit", "-q", "-m", "agent")
    return folder


@pytest.fixture(scope="session")
def agent_path() -> str:
    """EVALQ_AGENT_PATH for the real agents, installed (or found cached) by the script."""
    done = subprocess.run(["bash", str(INSTALL)], capture_output=True, text=True, timeout=1500)
    if done.returncode != 0:
        pytest.fail(f"installing the test agents failed; run `bash {INSTALL}` to see why:\n"
                    f"{done.stderr[-3000:]}", pytrace=False)
    return done.stdout.strip().splitlines()[-1]


def inventory_solution() -> str:
    return (ROOT / "fixtures" / "py-inventory-feature" / "solutions" / "correct" / "shop" /
            "inventory.py").read_text()


def write_manifest(folder: Path, fixture: Path, conditions: str, *, study_id: str = "agents",
                   repetitions: int = 1, wall: int = 180) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "study.toml"
    path.write_text(f'''
id = "{study_id}"
fixtures = ["{fixture.as_posix()}"]
repetitions = {repetitions}
seed = 3

[budgets]
wall_seconds = {wall}
{conditions}
''')
    return path


def run_study(manifest: Path, home: Path, env: dict | None = None,
              options: list[str] | None = None, wrap=None) -> dict:
    proc = run_cli(["run", str(manifest), *(options or [])],
                   {"EVALQ_HOME": str(home), **(env or {})}, timeout=600, wrap=wrap)
    assert proc.returncode == 0, proc.stderr[-4000:] + proc.stdout[-2000:]
    line = [l for l in proc.stdout.splitlines() if l.endswith("report.json")][0]
    return json.loads(Path(line.split("report: ", 1)[1]).read_text())


def attempts(home: Path) -> list[dict]:
    db = sqlite3.connect(home / "evalq.db")
    db.row_factory = sqlite3.Row
    rows = [dict(r) for r in db.execute("select * from attempts order by trial_id, attempt")]
    db.close()
    for row in rows:
        for key in ("metrics", "artifacts", "grade", "criteria", "worker_env"):
            if row.get(key):
                row[key] = json.loads(row[key])
    return rows


def artifact(home: Path, ref: str) -> bytes:
    digest = ref.split(":", 1)[1]
    return (home / "artifacts" / "sha256" / digest[:2] / digest).read_bytes()


def expanded(data: bytes) -> list[bytes]:
    """The bytes, plus every member of it when it is a gzip'd tar (a stored workspace)."""
    out = [data]
    if data[:2] == b"\x1f\x8b":
        raw = gzip.decompress(data)
        out.append(raw)
        try:
            with tarfile.open(fileobj=io.BytesIO(raw)) as archive:
                for member in archive.getmembers():
                    if member.isreg():
                        out.append(archive.extractfile(member).read())
        except tarfile.TarError:
            pass
    return out


__all__ = ["agent_path", "copy_fixture", "inventory_solution", "write_manifest", "run_study",
           "attempts", "artifact", "expanded"]
