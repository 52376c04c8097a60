"""compose.yaml against the code: services, commands and environment match what evalq reads.

The expected names come from evalq itself (evalq.config.ENV_KEYS, the click commands' options,
evalq.queue.app.QUEUES), so a renamed setting or option fails here instead of in a deployment.
"""

from __future__ import annotations

import importlib.util
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
ENTRYPOINT = ROOT / "workers" / "entrypoint.py"
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


def _entrypoint():
    """workers/entrypoint.py as a module (it is a script in the image, not part of evalq)."""
    spec = importlib.util.spec_from_file_location("evalq_entrypoint", ENTRYPOINT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _env_example() -> dict[str, str]:
    return dict(line.split("=", 1) for line in ENV_EXAMPLE.read_text().splitlines()
                if line and not line.startswith("#"))


def test_deploy_services_are_all_there(compose):
    assert set(compose["services"]) == SERVERS | {"flower"} | set(EVALQ_SERVICES)
    for name in ("redis-data", "postgres-data"):
        assert name in compose["volumes"], f"{name}: persistence needs a named volume"


def test_deploy_containers_take_settings_from_the_env_file_alone(compose):
    """Interpolated `environment:` values would let a variable exported in the shell that runs
    compose override .env inside the containers; env_file hands them the file as it is."""
    for name, service in compose["services"].items():
        assert service.get("env_file") == "${EVALQ_ENV_FILE:-.env}", name
        env = _env(service)
        assert not any("${" in value for value in env.values()), f"{name}: interpolated {env}"
        assert not any(key.startswith("EVALQ_") for key in env), f"{name}: {env}"


def test_deploy_env_example_sets_what_evalq_reads():
    """Every evalq setting is in .env.example, but those the image or its entry point set."""
    derived = {"EVALQ_HOME", "EVALQ_BROKER_URL", "EVALQ_DATABASE_URL"}
    assert set(ENV_KEYS.values()) - derived - set(_env_example()) == set()


def test_deploy_entrypoint_builds_urls_and_drops_the_passwords():
    entrypoint = _entrypoint()
    env = entrypoint.settings({**_env_example(), "REDIS_PASSWORD": "p@ss/word",
                               "EVALQ_VISIBILITY_TIMEOUT": "", "PATH": "/usr/bin"})
    assert env["EVALQ_BROKER_URL"] == "redis://:p%40ss%2Fword@redis:6379/0"
    assert env["EVALQ_DATABASE_URL"] == \
        "postgresql+psycopg2://evalq:change-me-postgres@postgres:5432/evalq"
    assert env["EVALQ_ARTIFACTS_URL"] == "/srv/evalq/artifacts"
    assert env["TMPDIR"] == "/var/lib/evalq/scratch"
    assert env["FLOWER_BASIC_AUTH"] == "evalq:change-me-flower"
    assert "EVALQ_VISIBILITY_TIMEOUT" not in env, "an empty value means evalq's default"
    for secret in ("REDIS_PASSWORD", "POSTGRES_PASSWORD", "FLOWER_PASSWORD"):
        assert secret not in env
    joined = entrypoint.settings({**_env_example(), "EVALQ_REDIS_HOST": "10.0.0.5",
                                  "EVALQ_REDIS_PORT": "16379", "EVALQ_ARTIFACTS_URL": "s3://b/x"})
    assert joined["EVALQ_BROKER_URL"] == "redis://:change-me-redis@10.0.0.5:16379/0"
    assert joined["EVALQ_ARTIFACTS_URL"] == "s3://b/x"
    given = entrypoint.settings({"EVALQ_BROKER_URL": "redis://other:6379/1",
                                 "REDIS_PASSWORD": "x"})
    assert given["EVALQ_BROKER_URL"] == "redis://other:6379/1"


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
    assert "--unauthenticated-api" not in values
    assert "FLOWER_USER" in _env_example() and "FLOWER_PASSWORD" in _env_example()
    entrypoint = _entrypoint()
    with pytest.raises(SystemExit, match="FLOWER_USER"):
        entrypoint.check(["flower"], {"EVALQ_BROKER_URL": "redis://x:6379/0"})


def test_deploy_agent_worker_refuses_a_docker_agent_sandbox_without_an_engine(monkeypatch):
    entrypoint = _entrypoint()
    monkeypatch.setattr(entrypoint, "DOCKER_SOCKET", "/nonexistent/docker.sock")
    servers = {"EVALQ_BROKER_URL": "redis://x:6379/0", "EVALQ_DATABASE_URL": "postgresql://x/y"}
    with pytest.raises(SystemExit, match="EVALQ_AGENT_SANDBOX=bwrap"):
        entrypoint.check(["worker", "--queues", "agents"], {**servers,
                                                             "EVALQ_AGENT_SANDBOX": "docker"})
    entrypoint.check(["worker", "--queues", "agents"], {**servers, "EVALQ_AGENT_SANDBOX": "bwrap"})


def test_deploy_redis_is_protected_and_persistent(compose):
    command = " ".join(compose["services"]["redis"]["command"])
    assert "requirepass" in command and "$$REDIS_PASSWORD" in command
    assert "--requirepass" not in command, "a password on the command line shows in ps"
    assert "--appendonly yes" in command
    for server in SERVERS | {"flower"}:
        for port in compose["services"][server]["ports"]:
            assert re.fullmatch(r"\$\{[A-Z_]+:-[^}]*\}:\$\{[A-Z_]+:-\d+\}:\d+", port), \
                f"{server}: bind address and port come from .env ({port})"


def test_deploy_grading_worker_reaches_the_docker_engine(compose):
    volumes = compose["services"]["grading-worker"]["volumes"]
    assert "/var/run/docker.sock:/var/run/docker.sock" in volumes
    scratch = "${EVALQ_GRADING_SCRATCH:-/var/lib/evalq/scratch}"
    assert f"{scratch}:{scratch}" in volumes, "the scratch dir needs the same path on the host"
    artifacts = "${EVALQ_ARTIFACTS_DIR:-/srv/evalq/artifacts}"
    for name in EVALQ_SERVICES:
        assert f"{artifacts}:{artifacts}" in compose["services"][name]["volumes"], \
            f"{name}: the artifact store at the same path as on the host"


def test_deploy_agent_worker_options_work_with_both_compose_versions(compose):
    """compose v1 sends security_opt to the engine as written, and the engine refuses
    `systempaths=unconfined` (only the docker CLI translates it)."""
    agent = compose["services"]["agent-worker"]
    assert not any(opt.startswith("systempaths") for opt in agent["security_opt"])
    assert not agent.get("privileged")
    assert "/var/run/docker.sock:/var/run/docker.sock" not in agent["volumes"]
    for name, service in compose["services"].items():
        if name != "agent-worker":
            assert "cap_add" not in service, f"{name} needs no added capability"


def test_deploy_env_example_defines_every_variable(compose):
    used = set(VARIABLE.findall(COMPOSE.read_text()))
    defined = set(_env_example())
    assert used - defined == set(), f".env.example lacks {used - defined}"
    read_in_containers = set(ENV_KEYS.values()) | set(re.findall(
        r"env(?:\.get)?\(?\[?[\"']([A-Z_]+)[\"']", ENTRYPOINT.read_text()))
    assert defined - used - read_in_containers == set(), \
        f".env.example defines unused {defined - used - read_in_containers}"


def test_deploy_worker_image_builds_without_a_registry(compose):
    text = (ROOT / "workers" / "Dockerfile").read_text()
    assert re.search(r"(?m)^ARG BASE_IMAGE=", text) and "FROM ${BASE_IMAGE}" in text
    assert "--no-index --find-links" in text, "a wheelhouse installs evalq with no index"
    assert "COPY workers/entrypoint.py" in text and ENTRYPOINT.exists()
    for name in set(EVALQ_SERVICES) | {"flower"}:
        build = compose["services"][name]["build"]
        assert (ROOT / build["context"] / build["dockerfile"]).resolve() == ROOT / "workers" / "Dockerfile"
        assert build["args"]["BASE_IMAGE"].startswith("${EVALQ_BASE_IMAGE")


COMPOSE_CLIS = {"v1": ["docker-compose"], "v2": ["docker", "compose"]}


@pytest.mark.parametrize("version", sorted(COMPOSE_CLIS))
def test_deploy_docker_compose_config_accepts_it(tmp_path, version):
    cli = COMPOSE_CLIS[version]
    if shutil.which(cli[0]) is None or subprocess.run(
            [*cli, "version"], capture_output=True).returncode != 0:
        pytest.fail(f"compose {version} ({' '.join(cli)}) is not installed; install it with: "
                    "bash scripts/ensure-docker.sh", pytrace=False)
    env_file = tmp_path / ".env"
    env_file.write_text(re.sub(r"(?m)^EVALQ_ENV_FILE=.*$", f"EVALQ_ENV_FILE={env_file}",
                               ENV_EXAMPLE.read_text()))
    clean = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root")}
    proc = subprocess.run([*cli, "--env-file", str(env_file), "-f", str(COMPOSE), "config"],
                          capture_output=True, text=True, timeout=60, env=clean)
    assert proc.returncode == 0, proc.stderr
    resolved = yaml.safe_load(proc.stdout)
    assert set(resolved["services"]) == SERVERS | {"flower"} | set(EVALQ_SERVICES)
    agent = resolved["services"]["agent-worker"]
    assert agent["command"][agent["command"].index("--concurrency") + 1] == "16"
    assert resolved["services"]["redis"]["image"] == "evalq-redis:local"
    assert agent["environment"]["REDIS_PASSWORD"] == "change-me-redis", "from the env file"
