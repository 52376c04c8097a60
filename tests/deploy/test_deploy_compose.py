"""compose.yaml against the code: services, commands and environment match what evalq reads.

The expected names come from evalq itself (evalq.config.ENV_KEYS, the click commands' options,
evalq.queue.app.QUEUES), so a renamed setting or option fails here instead of in a deployment.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import click
import pytest
import yaml

from evalq.cli import load_command
from evalq.config import ENV_KEYS
from evalq.queue.app import QUEUES

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "compose.yaml"
ENV_EXAMPLE = ROOT / ".env.example"
EVALQ_SERVICES = {"agent-worker": {"agents"}, "grading-worker": {"grading"},
                  "results": {"results"}}
SERVERS = {"redis", "postgres"}
VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?[-?][^}]*)?\}")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def _env(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    assert isinstance(env, dict), "environment must be a mapping (KEY: value)"
    return {k: str(v) for k, v in env.items()}


def _options(command_name: str) -> set[str]:
    command = load_command(command_name)
    return {opt for param in command.params if isinstance(param, click.Option)
            for opt in (*param.opts, *param.secondary_opts)}


def _option_values(argv: list[str]) -> dict[str, str]:
    values, i = {}, 1
    while i < len(argv):
        token = argv[i]
        assert token.startswith("-"), f"unexpected positional {token!r} in {argv}"
        if "=" in token:
            key, value = token.split("=", 1)
            values[key] = value
            i += 1
        else:
            values[token] = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else ""
            i += 2 if values[token] else 1
    return values


def test_deploy_services_are_all_there(compose):
    assert set(compose["services"]) == SERVERS | {"flower"} | set(EVALQ_SERVICES)
    for name in ("redis-data", "postgres-data"):
        assert name in compose["volumes"], f"{name}: persistence needs a named volume"


def test_deploy_environment_uses_exactly_evalqs_keys(compose):
    known = set(ENV_KEYS.values())
    for name in set(EVALQ_SERVICES) | {"flower"}:
        env = _env(compose["services"][name])
        evalq_keys = {k for k in env if k.startswith("EVALQ_")}
        assert evalq_keys - known == set(), f"{name}: evalq reads no {evalq_keys - known}"
        assert known - evalq_keys == set(), f"{name}: sets none of {known - evalq_keys}"
        assert env["EVALQ_BROKER_URL"].startswith("redis://:${REDIS_PASSWORD"), \
            f"{name}: the broker URL must carry the Redis password"
        assert env["EVALQ_DATABASE_URL"].startswith("postgresql"), name
    assert _env(compose["services"]["grading-worker"])["EVALQ_SANDBOX"].endswith("docker}")


def test_deploy_worker_commands_match_the_click_options(compose):
    options = _options("worker")
    served = set()
    for name, queues in EVALQ_SERVICES.items():
        argv = compose["services"][name]["command"]
        assert argv[0] == "worker", f"{name}: the image's entrypoint runs `evalq {argv[0]}`"
        values = _option_values(argv)
        assert set(values) <= options, f"{name}: evalq worker has no {set(values) - options}"
        listed = set(values["--queues"].split(","))
        assert listed == queues and listed <= set(QUEUES), (name, listed)
        served |= listed
        assert "@" in values["--hostname"], f"{name}: a node name is name@host"
        assert re.fullmatch(r"\$\{[A-Z_]+:-\d+\}|\d+", values["--concurrency"]), name
    assert served == set(QUEUES), f"no service consumes {set(QUEUES) - served}"


def test_deploy_flower_has_auth_and_valid_options(compose):
    flower = compose["services"]["flower"]
    argv = flower["command"]
    assert argv[0] == "flower"
    values = _option_values(argv)
    assert set(values) <= _options("flower"), set(values) - _options("flower")
    auth = _env(flower)["FLOWER_BASIC_AUTH"]
    assert "${FLOWER_USER" in auth and "${FLOWER_PASSWORD" in auth, "basic auth from .env"
    assert "--unauthenticated-api" not in values


def test_deploy_redis_is_protected_and_persistent(compose):
    command = compose["services"]["redis"]["command"]
    assert command[command.index("--requirepass") + 1].startswith("${REDIS_PASSWORD")
    assert command[command.index("--appendonly") + 1] == "yes"
    for server in SERVERS | {"flower"}:
        for port in compose["services"][server]["ports"]:
            assert port.startswith("${"), f"{server}: bind address must come from .env ({port})"


def test_deploy_grading_worker_reaches_the_docker_engine(compose):
    service = compose["services"]["grading-worker"]
    volumes = service["volumes"]
    assert "/var/run/docker.sock:/var/run/docker.sock" in volumes
    scratch = _env(service)["TMPDIR"]
    assert f"{scratch}:{scratch}" in volumes, "the scratch dir needs the same path on the host"


def test_deploy_env_example_defines_every_variable(compose):
    used = set(VARIABLE.findall(COMPOSE.read_text()))
    defined = {line.split("=", 1)[0] for line in ENV_EXAMPLE.read_text().splitlines()
               if line and not line.startswith("#")}
    assert used - defined == set(), f".env.example lacks {used - defined}"
    assert defined - used == set(), f".env.example defines unused {defined - used}"


def test_deploy_worker_image_installs_evalq(compose):
    dockerfile = ROOT / "workers" / "Dockerfile"
    text = dockerfile.read_text()
    assert "COPY evalq ./evalq" in text and "pip install ." in text
    assert "workers/entrypoint.sh" in text and (ROOT / "workers" / "entrypoint.sh").exists()
    for name in set(EVALQ_SERVICES) | {"flower"}:
        build = compose["services"][name]["build"]
        assert (ROOT / build["context"] / build["dockerfile"]).resolve() == dockerfile


def _compose_cli() -> list[str] | None:
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"],
                                                 capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


def test_deploy_docker_compose_config_accepts_it(tmp_path):
    cli = _compose_cli()
    if cli is None:
        pytest.fail("neither `docker compose` nor `docker-compose` is installed; install one "
                    "with: apt-get install -y docker-compose", pytrace=False)
    env_file = tmp_path / ".env"
    env_file.write_text(ENV_EXAMPLE.read_text())
    proc = subprocess.run([*cli, "--env-file", str(env_file), "-f", str(COMPOSE), "config"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    resolved = yaml.safe_load(proc.stdout)
    assert set(resolved["services"]) == SERVERS | {"flower"} | set(EVALQ_SERVICES)
    broker = resolved["services"]["agent-worker"]["environment"]["EVALQ_BROKER_URL"]
    assert broker == "redis://:change-me-redis@redis:6379/0"
    empty = tmp_path / "empty.env"
    empty.write_text("")
    env = {k: v for k, v in os.environ.items() if k not in {"REDIS_PASSWORD", "POSTGRES_PASSWORD"}}
    missing = subprocess.run([*cli, "--env-file", str(empty), "-f", str(COMPOSE), "config"],
                             capture_output=True, text=True, timeout=60, env=env)
    assert missing.returncode != 0 and "REDIS_PASSWORD" in missing.stderr
