"""Orchestration overhead per trial against the floor, and throughput with 1 and 2 workers per queue.

For each sandbox (bubblewrap; Docker when the engine and image are there) and each worker count,
two runs through the same private Redis with the same worker layout (one worker per queue, N
processes each): first the floor (bench.floor_app: three trivial Celery hops with one raw sandbox
start), then a real study of N no-op trials (scripted agent action "noop", bench-noop fixture whose
hidden check passes at once) through evalq's agents, grading and results queues into the database.
Per-trial cost = wall time from the first send to the last result, divided by N.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import shutil
import subprocess
import time
import uuid
from pathlib import Path

from celery import Celery

from evalq.config import Settings
from evalq.queue.app import QUEUES, configure

from .figures import Figure, ratio
from .floor_app import raw_start
from .services import (ROOT, Workers, celery_worker_argv, child_env, evalq_worker_argv,
                       wait_for)

FIXTURE = ROOT / "bench" / "fixture" / "bench-noop"
IMAGE = "evalq-grader-python:local"
TARGETS = {"bwrap": 1.5, "docker": 1.2}


def docker_ready() -> tuple[bool, str]:
    if shutil.which("docker") is None:
        return False, "the docker CLI is not installed (bash scripts/ensure-docker.sh)"
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        return False, "the Docker engine does not answer (bash scripts/ensure-docker.sh)"
    if subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True).returncode:
        return False, f"image {IMAGE} is missing (bash scripts/build-grader-images.sh python)"
    return True, ""


def settings_for(workdir: Path, broker: str, database: str, sandbox: str) -> Settings:
    return Settings(home=workdir / "home", database_url=database, broker_url=broker,
                    artifacts_url=str(workdir / "artifacts"), sandbox=sandbox,
                    max_trial_seconds=600.0, lease_seconds=60.0)


def write_study(folder: Path, study_id: str, trials: int) -> Path:
    """Two no-op conditions × trials/2 repetitions of the bench fixture."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "study.toml"
    path.write_text(f'''id = "{study_id}"
fixtures = ["{FIXTURE.as_posix()}"]
repetitions = {max(1, trials // 2)}
seed = 1

[budgets]
wall_seconds = 60

[[conditions]]
name = "noop-a"
agent = "scripted"
settings = {{ action = "noop" }}

[[conditions]]
name = "noop-b"
agent = "scripted"
settings = {{ action = "noop" }}
''')
    return path


def _start(workers: Workers, argv_of, env, concurrency: int, tag: str) -> None:
    for queue in QUEUES:
        workers.start(argv_of(queue, concurrency, f"{tag}-{queue}@bench"), env, f"{tag}-{queue}")
    workers.wait_ready()


def run_floor(settings: Settings, sandbox: str, concurrency: int, n: int, logdir: Path) -> dict:
    env = child_env(settings.env())
    workers = Workers(logdir)
    try:
        _start(workers, lambda q, c, name: celery_worker_argv("bench.floor_app", q, c, name),
               env, concurrency, f"floor-{sandbox}-c{concurrency}")
        import redis

        client = redis.Redis.from_url(settings.broker_url)
        sender = configure(Celery("bench_send"), settings)
        run = uuid.uuid4().hex[:8]
        started = time.time()
        with sender.producer_or_acquire() as producer:
            for i in range(n):
                sender.send_task("bench.floor_agent", queue="agents", producer=producer,
                                 args=[{"run": run, "i": i, "sandbox": sandbox, "image": IMAGE}])
        done = lambda: int(client.get(f"bench:floor:{run}:done") or 0) >= n  # noqa: E731
        wait_for(done, 60 + n * 5.0, f"{n} floor round trips", poll=0.1)
        last = float(client.get(f"bench:floor:{run}:last"))
    finally:
        workers.stop()
    return {"trials": n, "wall_seconds": last - started, "per_trial": (last - started) / n}


def run_study(settings: Settings, concurrency: int, n: int, workdir: Path, logdir: Path) -> dict:
    from sqlalchemy import func
    from sqlmodel import Session, select

    from evalq.queue.launch import register_study, send_trials
    from evalq.study.manifest import load_manifest
    from evalq.queue.app import app
    from evalq.results.store import AttemptRow, attempts_of

    env = child_env(settings.env())
    study_id = f"bench-{settings.sandbox}-c{concurrency}-{uuid.uuid4().hex[:6]}"
    study = load_manifest(write_study(workdir / study_id, study_id, n))
    configure(app, settings)
    engine, _, _ = register_study(study, settings)
    workers = Workers(logdir)
    try:
        _start(workers, lambda q, c, name: evalq_worker_argv(q, c, name), env, concurrency,
               f"evalq-{settings.sandbox}-c{concurrency}")
        started = time.time()
        summary = send_trials(app, study, engine, resume=False)

        def finished() -> bool:
            with Session(engine) as session:
                count = session.exec(select(func.count()).select_from(AttemptRow).where(
                    AttemptRow.study_id == study_id, AttemptRow.outcome.is_not(None))).one()
            return count >= summary.planned

        wait_for(finished, 120 + summary.planned * 10.0, f"{summary.planned} trials", poll=0.2)
    finally:
        workers.stop()
    rows = attempts_of(engine, study_id)
    last = max(r.finished_at for r in rows)
    outcomes: dict[str, int] = {}
    for row in rows:
        outcomes[row.outcome] = outcomes.get(row.outcome, 0) + 1

    def mean(values) -> float | None:
        values = [v for v in values if v is not None]
        return sum(values) / len(values) if values else None

    stages = {
        "agent_stage_seconds": mean(r.agent_finished_at - r.started_at for r in rows
                                    if r.agent_finished_at and r.started_at),
        "grader_run_seconds": mean((r.grade or {}).get("duration_seconds") for r in rows),
        "grading_stage_seconds": mean(r.graded_at - (r.grade or {}).get("started_at", r.graded_at)
                                      for r in rows if r.graded_at),
        "record_latency_seconds": mean(r.finished_at - r.graded_at for r in rows
                                       if r.graded_at and r.finished_at),
    }
    return {"study": study_id, "trials": summary.planned, "wall_seconds": last - started,
            "per_trial": (last - started) / summary.planned, "outcomes": outcomes, **stages}


def raw_starts(sandbox: str, n: int) -> dict:
    raw_start(sandbox, IMAGE)  # warm caches once
    times = sorted(raw_start(sandbox, IMAGE) for _ in range(n))
    return {"n": n, "mean": sum(times) / n, "median": times[n // 2]}


def agent_process_starts(n: int) -> dict:
    """The scripted agent's own process doing nothing: a Python interpreter start, not evalq's
    orchestration, so it is reported beside the ratio (real agents are processes too)."""
    import json
    import sys

    argv = [sys.executable, "-m", "evalq.workers.agents.scripted_process",
            json.dumps({"action": "noop"})]
    times = []
    for _ in range(n + 1):
        started = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, cwd=ROOT)
        times.append(time.perf_counter() - started)
    times = sorted(times[1:])
    return {"n": n, "mean": sum(times) / n, "median": times[n // 2]}


def profile_trials(settings: Settings, workdir: Path, n: int) -> dict:
    """cProfile of the three task bodies run in this process (broker DB 1: no worker reads it)."""
    from evalq.graders.grade import grade_workspace
    from evalq.queue.launch import register_study, send_trials
    from evalq.study.manifest import load_manifest
    from evalq.queue.app import app
    from evalq.results.store import record_attempt, trials_of
    from evalq.queue.sending import send
    from evalq.workers.runner import run_trial_message
    from evalq.queue.messages import message_for

    side = settings.model_copy(update={"broker_url": settings.broker_url.rsplit("/", 1)[0]
                                                     + "/1"})
    study_id = f"bench-profile-{uuid.uuid4().hex[:6]}"
    study = load_manifest(write_study(workdir / study_id, study_id, n))
    configure(app, side)
    engine, _, _ = register_study(study, side)
    send_trials(app, study, engine, resume=False)
    trials = trials_of(engine, study_id)
    fixture = study.fixtures[0]
    out: dict = {}
    for name, body in (
        ("agent task (run_trial_message)",
         lambda t: run_trial_message(message_for(t, 1, 3), send, hostname="p@bench",
                                     settings=side)),
        (f"grading ({settings.sandbox} sandbox)",
         lambda t: grade_workspace(fixture, fixture.workspace_dir, sandbox=settings.sandbox)),
        ("results upsert (record_attempt)",
         lambda t: record_attempt(engine, {"study_id": study_id, "trial_id": t.id, "attempt": 1,
                                           "outcome": "correct", "finished_at": time.time()})),
    ):
        profiler = cProfile.Profile()
        started = time.perf_counter()
        profiler.enable()
        for trial in trials:
            body(trial)
        profiler.disable()
        per = (time.perf_counter() - started) / len(trials)
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(18)
        out[name] = {"per_call_seconds": per, "top_cumulative": _trim(text.getvalue())}
    return out


def _trim(text: str) -> list[str]:
    lines = [l.rstrip() for l in text.splitlines() if l.strip()]
    start = next((i for i, l in enumerate(lines) if l.lstrip().startswith("ncalls")), 0)
    return [l.replace(str(ROOT) + "/", "").replace("/usr/lib/python3", "py")
            for l in lines[start:start + 19]]


def run(workdir: Path, broker: str, database: str, trials: int, concurrencies: list[int],
        raw_n: int, log) -> tuple[list[Figure], dict]:
    figures: list[Figure] = []
    data: dict = {"trials": trials, "runs": {}}
    logdir = workdir / "logs"
    logdir.mkdir(parents=True, exist_ok=True)
    ok, why = docker_ready()
    sandboxes = ["bwrap"] + (["docker"] if ok else [])
    if not ok:
        data["docker"] = f"unavailable: {why}"
        figures.append(Figure("overhead per trial, Docker", None, "s",
                              target=TARGETS["docker"], reference="floor",
                              note=f"not measured: {why}"))
    data["celery_hops_only"] = {}
    data["agent_process"] = agent_process_starts(max(5, raw_n // 5))
    agent_cost = data["agent_process"]["mean"]
    log(f"scripted no-op agent process: {agent_cost * 1000:.1f} ms")
    for sandbox in sandboxes:
        settings = settings_for(workdir, broker, database, sandbox)
        data[f"raw_start_{sandbox}"] = raw_starts(sandbox, raw_n)
        log(f"raw {sandbox} start: {data[f'raw_start_{sandbox}']['mean'] * 1000:.1f} ms")
        for c in concurrencies:
            key = f"{sandbox}-c{c}"
            floor = run_floor(settings, sandbox, c, trials, logdir)
            log(f"floor {key}: {floor['per_trial'] * 1000:.1f} ms/trial")
            study = run_study(settings, c, trials, workdir, logdir)
            log(f"study {key}: {study['per_trial'] * 1000:.1f} ms/trial, {study['outcomes']}")
            data["runs"][key] = {"floor": floor, "study": study}
            wrong = {k: v for k, v in study["outcomes"].items() if k != "correct"}
            # c agent processes run side by side, so the agent process adds agent_cost / c.
            note = (f"without the no-op agent's own process ({agent_cost * 1000:.0f} ms / {c}): "
                    f"{(study['per_trial'] - agent_cost / c) / floor['per_trial']:.2f}×")
            if wrong:
                note += f"; outcomes {study['outcomes']}"
            figures.append(Figure(
                f"overhead per trial, {sandbox}, {c} worker process(es) per queue",
                study["per_trial"], "s", target=TARGETS[sandbox], reference=f"floor "
                f"({floor['per_trial'] * 1000:.1f} ms: 3 Celery hops + raw {sandbox} start)",
                ratio=ratio(study["per_trial"], floor["per_trial"]), note=note,
                extra={"study": study, "floor": floor}))
            figures.append(Figure(f"throughput, {sandbox}, {c} worker process(es) per queue",
                                  study["trials"] / study["wall_seconds"], "trials/s"))
    settings = settings_for(workdir, broker, database, "bwrap")
    hops = run_floor(settings, "none", concurrencies[0], trials, logdir)
    data["celery_hops_only"] = hops
    figures.append(Figure(f"floor part: 3 Celery hops, no sandbox, {concurrencies[0]} process "
                          "per queue", hops["per_trial"], "s"))
    for sandbox in sandboxes:
        figures.append(Figure(f"floor part: raw {sandbox} start (sequential mean)",
                              data[f"raw_start_{sandbox}"]["mean"], "s"))
    figures.append(Figure("not in the floor: the scripted no-op agent's process (mean)",
                          agent_cost, "s"))
    log("profiling the task bodies in-process")
    data["profile"] = {}
    for sandbox in sandboxes:
        try:
            data["profile"][sandbox] = profile_trials(
                settings_for(workdir, broker, database, sandbox), workdir, min(20, trials))
        except Exception as exc:  # noqa: BLE001 - the measured figures above still stand
            data["profile"][sandbox] = f"unavailable: {type(exc).__name__}: {exc}"
            log(f"profile ({sandbox}) failed: {exc}")
    return figures, data
