"""Several machines as the README deploys them, with their faults.

A first compose project (Debian's docker-compose v1) is the server machine: Redis, PostgreSQL,
Flower, the results service, 3 agent workers and 2 grading workers, all from the locally built
images (`make images`). A second project (compose v2) on the same compose network is a second
machine that joins with `--no-deps agent-worker grading-worker`. `evalq run` on the host runs a
40-trial scripted study through them while the test kills an agent worker mid-trial, restarts
Redis, kills a grading worker mid-grade and adds workers back. Then every trial must have
exactly one final outcome, the scripted one, with every agent sealed by bubblewrap; Flower
(basic auth) must list every worker and the trials by name; the report must be written.
Everything the test made (containers, volumes, network, folders) is removed afterwards.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from base64 import b64encode
from pathlib import Path

import pytest
import sqlalchemy

from tests.conftest import EVALQ, FIXTURES, cli_env

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "compose.yaml"
IMAGES = ("evalq-worker:local", "evalq-redis:local", "evalq-postgres:local",
          "evalq-grader-python:local")
V1 = ["docker-compose"]
V2 = ["docker", "compose"]
FIXTURE_NAMES = ("py-slugify-bugfix", "py-inventory-feature")
REPETITIONS = 10
TRIALS = len(FIXTURE_NAMES) * 2 * REPETITIONS
#: what a trial's final outcome must be, by condition (the scripted agent applies the fixture's
#: correct or incorrect reference)
SCRIPTED = {"good": "correct", "bad": "incorrect"}
#: set in the shell that runs compose: none of them may reach a container (.env alone does)
SHELL_POISON = {"EVALQ_AGENT_SANDBOX": "none", "EVALQ_AGENT_PATH": "/leaked/from/the/shell",
                "EVALQ_DATABASE_URL": "sqlite:////leaked.db"}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait(what: str, check, timeout: float, every: float = 0.5, launcher=None, log=None):
    """Poll `check` until it returns something true; fail naming `what` at the deadline, or as
    soon as `launcher` (the `evalq run` under way) has ended."""
    deadline = time.monotonic() + timeout
    while True:
        if launcher is not None and launcher.poll() is not None:
            pytest.fail(f"evalq run ended (exit {launcher.returncode}) before {what}:\n"
                        f"{log.read_text()[-3000:]}", pytrace=False)
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}", pytrace=False)
        time.sleep(every)


def _require_deployment_tools() -> None:
    if shutil.which("docker") is None or subprocess.run(
            ["docker", "info"], capture_output=True, timeout=60).returncode != 0:
        pytest.fail("no Docker engine answers; start one with: bash scripts/ensure-docker.sh",
                    pytrace=False)
    if shutil.which("docker-compose") is None or subprocess.run(
            [*V2, "version"], capture_output=True, timeout=60).returncode != 0:
        pytest.fail("compose v1 and v2 are both needed; install them with: "
                    "bash scripts/ensure-docker.sh", pytrace=False)
    missing = [image for image in IMAGES if subprocess.run(
        ["docker", "image", "inspect", image], capture_output=True, timeout=60).returncode != 0]
    if missing:
        pytest.fail(f"images {', '.join(missing)} are missing; build them with: make images",
                    pytrace=False)


class Machine:
    """One compose project: its own .env (from .env.example) and compose CLI."""

    def __init__(self, deployment: "Deployment", name: str, cli: list[str], machine: str,
                 joins: bool = False):
        self.project = f"{deployment.name}{name}"
        self.cli = cli
        self.env_file = deployment.folder / f"{name}.env"
        values = {**deployment.settings, "EVALQ_MACHINE": machine,
                  "EVALQ_ENV_FILE": str(self.env_file),
                  "EVALQ_JOIN_NETWORK": "true" if joins else "false"}
        text = (ROOT / ".env.example").read_text()
        for key, value in values.items():
            text, found = re.subn(rf"(?m)^{key}=.*$", f"{key}={value}", text)
            assert found == 1, f".env.example has no line {key}="
        self.env_file.write_text(text)

    def compose(self, *args: str, timeout: float = 300) -> str:
        env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root"),
               **SHELL_POISON}
        if "DOCKER_HOST" in os.environ:
            env["DOCKER_HOST"] = os.environ["DOCKER_HOST"]
        proc = subprocess.run([*self.cli, "-p", self.project, "--env-file", str(self.env_file),
                               "-f", str(COMPOSE), *args], capture_output=True, text=True,
                              env=env, timeout=timeout)
        assert proc.returncode == 0, f"{' '.join(self.cli)} {' '.join(args)}: {proc.stderr[-3000:]}"
        return proc.stdout

    def containers(self, service: str) -> list[str]:
        """Running containers of a service, by their hostname (the short id, as in worker names)."""
        return [c[:12] for c in self.compose("ps", "-q", service).split()
                if subprocess.run(["docker", "inspect", "-f", "{{.State.Running}}", c],
                                  capture_output=True, text=True).stdout.strip() == "true"]


class Deployment:
    """Settings shared by both machines, the host's view of the servers, and the cleanup."""

    def __init__(self, tmp_path: Path):
        ident = uuid.uuid4().hex[:8]
        self.name = f"evalqdeploy{ident}"
        self.folder = tmp_path
        # short: the grading scratch holds unix sockets (a path of at most 107 bytes)
        self.root = Path(f"/var/lib/evalq-deploy-{ident}")
        self.ports = {key: _free_port() for key in ("REDIS_PORT", "POSTGRES_PORT", "FLOWER_PORT")}
        self.passwords = {key: secrets.token_hex(16) for key in
                          ("REDIS_PASSWORD", "POSTGRES_PASSWORD", "FLOWER_PASSWORD")}
        self.settings = {**self.ports, **self.passwords, "FLOWER_USER": "evalq-test",
                         "EVALQ_NETWORK": self.name,
                         "EVALQ_ARTIFACTS_DIR": str(self.root / "artifacts"),
                         "EVALQ_GRADING_SCRATCH": str(self.root / "scratch"),
                         "EVALQ_IMAGE": "evalq-worker:local",
                         "EVALQ_REDIS_IMAGE": "evalq-redis:local",
                         "EVALQ_POSTGRES_IMAGE": "evalq-postgres:local",
                         "AGENT_CONCURRENCY": "4", "GRADING_CONCURRENCY": "2",
                         "EVALQ_LEASE_SECONDS": "10", "EVALQ_MAX_TRIAL_SECONDS": "300",
                         "EVALQ_WAIT_SECONDS": "120"}
        self.database = sqlalchemy.create_engine(
            f"postgresql+psycopg2://evalq:{self.passwords['POSTGRES_PASSWORD']}@127.0.0.1:"
            f"{self.ports['POSTGRES_PORT']}/evalq", pool_pre_ping=True)
        self.server = Machine(self, "server", V1, "machine-1")
        self.joiner = Machine(self, "joiner", V2, "machine-2", joins=True)

    def host_env(self) -> dict[str, str]:
        """What `evalq run` and `evalq report` on the host are given (README)."""
        return {"EVALQ_BROKER_URL": f"redis://:{self.passwords['REDIS_PASSWORD']}@127.0.0.1:"
                                    f"{self.ports['REDIS_PORT']}/0",
                "EVALQ_DATABASE_URL": str(self.database.url.render_as_string(hide_password=False)),
                "EVALQ_ARTIFACTS_URL": str(self.root / "artifacts"),
                "EVALQ_HOME": str(self.folder / "home")}

    def flower(self, path: str, auth: bool = True):
        request = urllib.request.Request(f"http://127.0.0.1:{self.ports['FLOWER_PORT']}{path}")
        if auth:
            token = b64encode(f"evalq-test:{self.passwords['FLOWER_PASSWORD']}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def flower_workers(self) -> set[str]:
        """Workers Flower shows online (from their heartbeats, as on its Workers page)."""
        try:
            shown = self.flower("/workers?json=1")["data"]
        except (urllib.error.URLError, ConnectionError, json.JSONDecodeError, KeyError):
            return set()
        return {worker["hostname"] for worker in shown if worker.get("status")}

    def attempts(self, study: str) -> list[dict]:
        with self.database.connect() as conn:
            rows = conn.execute(sqlalchemy.text(
                "SELECT a.trial_id, a.attempt, a.state, a.outcome, a.reason, a.lease_owner, "
                "a.worker_env, t.condition FROM attempts a JOIN trials t ON t.id = a.trial_id "
                "WHERE a.study_id = :s"), {"s": study})
            return [dict(row._mapping) for row in rows]

    def holder(self, study: str, state: str, machine: Machine) -> str | None:
        """A container of `machine` holding the lease of an attempt in `state` (a lease owner
        names the worker's host, which is the container's short id)."""
        running = set(machine.containers("agent-worker" if state == "running"
                                         else "grading-worker"))
        for row in self.attempts(study):
            owner = row["lease_owner"] or ""
            match = re.search(r"machine-1-([0-9a-f]{12})", owner)
            if row["state"] == state and match and match.group(1) in running:
                return match.group(1)
        return None

    def remove(self) -> None:
        for machine in (self.joiner, self.server):
            try:
                machine.compose("down", "-v", "--remove-orphans", "-t", "5", timeout=180)
            except (AssertionError, subprocess.TimeoutExpired):
                pass
        leftovers = subprocess.run(["docker", "ps", "-aq", "--filter", "label=evalq.sandbox",
                                    "--filter", f"label=evalq.label"], capture_output=True,
                                   text=True).stdout.split()
        for container in leftovers:
            labels = subprocess.run(["docker", "inspect", "-f",
                                     '{{index .Config.Labels "evalq.label"}}', container],
                                    capture_output=True, text=True).stdout
            if "deploy-" in labels:
                subprocess.run(["docker", "rm", "-f", container], capture_output=True)
        subprocess.run(["docker", "network", "rm", self.name], capture_output=True)
        self.database.dispose()
        shutil.rmtree(self.root, ignore_errors=True)


def _write_study(folder: Path, study_id: str) -> Path:
    fixtures = ", ".join(f'"{(FIXTURES / name).as_posix()}"' for name in FIXTURE_NAMES)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "study.toml"
    conditions = "".join(f'''
[[conditions]]
name = "{name}"
agent = "scripted"
settings = {{ action = "solution", solution = "{solution}", seconds = 4 }}
''' for name, solution in (("good", "correct"), ("bad", "incorrect")))
    path.write_text(f'id = "{study_id}"\nfixtures = [{fixtures}]\nrepetitions = {REPETITIONS}\n'
                    f'seed = 11\n\n[budgets]\nwall_seconds = 120\n{conditions}')
    return path


@pytest.fixture
def deployment(tmp_path):
    _require_deployment_tools()
    deployment = Deployment(tmp_path)
    try:
        yield deployment
    finally:
        deployment.remove()


def test_deploy_several_machines_survive_their_faults(deployment, tmp_path):
    server, joiner = deployment.server, deployment.joiner
    server.compose("up", "-d", "--no-build", "--scale", "agent-worker=3",
                   "--scale", "grading-worker=2")
    expected_first = 3 + 2 + 1  # agent, grading and results workers of machine-1
    _wait("the server machine's 6 workers in Flower",
          lambda: len(deployment.flower_workers()) >= expected_first, timeout=180)
    with pytest.raises(urllib.error.HTTPError) as refused:
        deployment.flower("/workers?json=1", auth=False)
    assert refused.value.code == 401, "Flower must ask for basic auth"

    study_id = f"deploy-{deployment.name[-8:]}"
    study = _write_study(tmp_path / "study", study_id)
    host_env = deployment.host_env()
    log = (tmp_path / "run.log").open("w")
    launcher = subprocess.Popen([*EVALQ, "run", str(study), "--yes"], env=cli_env(host_env),
                                stdout=log, stderr=subprocess.STDOUT, cwd=study.parent)
    try:
        # an agent worker dies mid-trial: its lease expires and the trial runs again elsewhere
        victim = _wait("an agent worker in the middle of a trial", lambda: deployment.holder(
            study_id, "running", server), timeout=180, every=0.2,
            launcher=launcher, log=tmp_path / "run.log")
        subprocess.run(["docker", "kill", victim], check=True, capture_output=True)
        # a second machine joins (compose v2, the same .env but its machine name)
        joiner.compose("up", "-d", "--no-build", "--no-deps", "agent-worker", "grading-worker")
        # Redis goes away for a while and comes back with its append-only file
        server.compose("stop", "-t", "1", "redis")
        time.sleep(15)  # the outage itself, not a wait for anything
        server.compose("start", "redis")
        # a grading worker dies mid-grade
        grader = _wait("a grading worker in the middle of a grading", lambda: deployment.holder(
            study_id, "grading", server), timeout=240, every=0.2,
            launcher=launcher, log=tmp_path / "run.log")
        subprocess.run(["docker", "kill", grader], check=True, capture_output=True)
        # workers are added back on the first machine
        server.compose("up", "-d", "--no-build", "--no-recreate", "--scale", "agent-worker=3",
                       "--scale", "grading-worker=2")
        returncode = launcher.wait(timeout=900)
    finally:
        if launcher.poll() is None:
            launcher.kill()
        log.close()
    output = (tmp_path / "run.log").read_text()
    assert returncode == 0, output[-4000:]
    assert deployment.passwords["REDIS_PASSWORD"] not in output, "the launcher printed a password"

    attempts = deployment.attempts(study_id)
    trials = {row["trial_id"] for row in attempts}
    assert len(trials) == TRIALS, f"{TRIALS - len(trials)} trial(s) lost"
    stuck = [row for row in attempts if row["state"] not in ("done", "cancelled")]
    assert stuck == [], f"attempts never finished: {stuck}"
    for trial in sorted(trials):
        finals = [row for row in attempts if row["trial_id"] == trial
                  and row["outcome"] in ("correct", "incorrect")]
        assert len(finals) == 1, f"{trial}: {len(finals)} graded attempts (lost or doubled)"
        row = finals[0]
        assert row["outcome"] == SCRIPTED[row["condition"]], (trial, row["outcome"], row["reason"])
        assert (row["worker_env"] or {}).get("agent_sandbox") == "bwrap", (trial, row["worker_env"])
    failures = [(row["trial_id"], row["outcome"], row["reason"]) for row in attempts
                if row["outcome"] in ("grading_failure", "infrastructure_failure")]
    assert failures == [], f"evalq's own failures recorded: {failures}"

    running = {f"{queue}@{machine}-{container}"
               for project, machine in ((server, "machine-1"), (joiner, "machine-2"))
               for service, queue in (("agent-worker", "agents"), ("grading-worker", "grading"),
                                      ("results", "results"))
               for container in (project.containers(service) if service != "results"
                                 or project is server else [])}
    assert len(running) == 3 + 2 + 1 + 2, running
    _wait("every running worker online in Flower",
          lambda: deployment.flower_workers() >= running, timeout=60)
    tasks = deployment.flower("/api/tasks?limit=1000")
    named = {str(task.get("args")) + str(task.get("name")) for task in tasks.values()}
    assert any(f"{study_id}/" in text for text in named), "Flower shows no trial by name"

    report = subprocess.run([*EVALQ, "report", study_id], env=cli_env(host_env),
                            capture_output=True, text=True, timeout=300)
    assert report.returncode == 0, report.stderr
    written = json.loads((Path(host_env["EVALQ_HOME"]) / "reports" / study_id
                          / "report.json").read_text())
    assert written["agent_sandbox"]["sealed"] is True, written["agent_sandbox"]
