"""Orchestration overhead per trial against the floor, and throughput with 1 and 2 workers per queue.

For each sandbox (bubblewrap; Docker when the engine and image are there) and each worker count,
two runs through the same private Redis with the same worker layout (one worker per queue, N
processes each): first the floor (bench.floor_app: three trivial Celery hops with one raw sandbox
start), then a real study of N no-op trials (scripted agent action "noop", bench-noop fixture whose
hidden check passes at once) through evalq's agents, grading and results queues into the database.
Per-trial cost = wall time from the first send to the last result, divided by N.

Beside the pipelined figures: the same trial sent one at a time against the sum of its floor
parts, each measured alone (bench.critical_path), and the embedded default's trial rate as a
ratio to the Redis path's rate from this same run (bench.embedded_run).
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

from .critical_path import breakdown_figure, floor_parts, send_one_at_a_time
from .embedded_run import run_embedded
from .figures import Figure, ratio
from .floor_app import raw_start
from .noop_study import (FIXTURE, IMAGE, now, pipelined_figures, settings_for, wait_finished,
                         write_study)
from .services import (ROOT, Workers, celery_worker_argv, child_env, evalq_worker_argv,
                       wait_for)

__all__ = ["FIXTURE", "IMAGE", "docker_ready", "run"]

TARGETS = {"bwrap": 1.5, "docker": 1.2}
#: the embedded default's trial rate, at least this fraction of the Redis path's (issue 19)
EMBEDDED_TARGET = 0.8


def docker_ready() -> tuple[bool, str]:
    if shutil.which("docker") is None:
        return False, "the docker CLI is not installed (bash scripts/ensure-docker.sh)"
    if subprocess.run(["docker", "info"], capture_output=True).returncode != 0:
        return False, "the Docker engine does not answer (bash scripts/ensure-docker.sh)"
    if subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True).returncode:
        return False, f"image {IMAGE} is missing (bash scripts/build-grader-images.sh python)"
    return True, ""


def _start(workers: Workers, argv_of, env, concurrency: int, tag: str) -> None:
    for queue in QUEUES:
        workers.start(argv_of(queue, concurrency, f"{tag}-{queue}@bench"), env, f"{tag}-{queue}")
    workers.wait_ready()


def run_floor(settings: Settings, sandbox: str, concurrency: int, n: int, logdir: Path,
              sequential: bool = False) -> dict:
    """n floor round trips, all sent at once (pipelined) or each after the last one ended."""
    env = child_env(settings.env())
    workers = Workers(logdir)
    mode = "seq" if sequential else "pipe"
    try:
        _start(workers, lambda q, c, name: celery_worker_argv("bench.floor_app", q, c, name),
               env, concurrency, f"floor-{sandbox}-c{concurrency}-{mode}")
        import redis

        client = redis.Redis.from_url(settings.broker_url)
        sender = configure(Celery("bench_send"), settings)
        run = uuid.uuid4().hex[:8]
        done = lambda count: int(client.get(f"bench:floor:{run}:done") or 0) >= count  # noqa
        started = time.time()
        with sender.producer_or_acquire() as producer:
            for i in range(n):
                sender.send_task("bench.floor_agent", queue="agents", producer=producer,
                                 args=[{"run": run, "i": i, "sandbox": sandbox, "image": IMAGE}])
                if sequential:
                    wait_for(lambda: done(i + 1), 60, f"floor round trip {i}", poll=0.001)
        wait_for(lambda: done(n), 60 + n * 5.0, f"{n} floor round trips", poll=0.1)
        last = float(client.get(f"bench:floor:{run}:last"))
    finally:
        workers.stop()
    return {"trials": n, "wall_seconds": last - started, "per_trial": (last - started) / n}


def run_study(settings: Settings, concurrency: int, n: int, workdir: Path, logdir: Path,
              sequential: bool = False) -> dict:
    """A no-op study through evalq's Redis workers: all sent at once, or one at a time."""
    from evalq.queue.launch import register_study, send_trials
    from evalq.study.manifest import load_manifest
    from evalq.queue.app import app

    env = child_env(settings.env())
    mode = "seq" if sequential else "pipe"
    study_id = f"bench-{settings.sandbox}-c{concurrency}-{mode}-{uuid.uuid4().hex[:6]}"
    study = load_manifest(write_study(workdir / study_id, study_id, n))
    configure(app, settings)
    engine, _, _ = register_study(study, settings)
    workers = Workers(logdir)
    try:
        _start(workers, lambda q, c, name: evalq_worker_argv(q, c, name), env, concurrency,
               f"evalq-{settings.sandbox}-c{concurrency}-{mode}")
        if sequential:
            return send_one_at_a_time(app, study, engine)
        started = now()
        summary = send_trials(app, study, engine, resume=False)
        wait_finished(engine, study_id, summary.planned, 120 + summary.planned * 10.0)
    finally:
        workers.stop()
    return pipelined_figures(engine, study_id, started)


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
    data: dict = {"trials": trials, "runs": {}, "one_at_a_time": {}, "embedded": {}}
    logdir = workdir / "logs"
    logdir.mkdir(parents=True, exist_ok=True)
    ok, why = docker_ready()
    sandboxes = ["bwrap"] + (["docker"] if ok else [])
    if not ok:
        data["docker"] = f"unavailable: {why}"
        figures.append(Figure("overhead per trial, Docker", None, "s",
                              target=TARGETS["docker"], reference="floor",
                              note=f"not measured: {why}"))
    data["agent_process"] = agent_process_starts(max(5, raw_n // 5))
    agent_cost = data["agent_process"]["mean"]
    log(f"scripted no-op agent process: {agent_cost * 1000:.1f} ms")
    sequential_n = max(5, min(30, trials // 5))
    db_kind = "PostgreSQL" if database.startswith("postgres") else "SQLite"
    base = settings_for(workdir, broker, database, "bwrap")
    raw: dict[str, float] = {}
    for sandbox in sandboxes:
        data[f"raw_start_{sandbox}"] = raw_starts(sandbox, raw_n)
        raw[sandbox] = data[f"raw_start_{sandbox}"]["mean"]
        log(f"raw {sandbox} start: {raw[sandbox] * 1000:.1f} ms")
    if base.agent_sandbox not in raw and base.agent_sandbox != "none":
        data[f"raw_start_{base.agent_sandbox}"] = raw_starts(base.agent_sandbox, raw_n)
        raw[base.agent_sandbox] = data[f"raw_start_{base.agent_sandbox}"]["mean"]
    hops = run_floor(base, "none", 1, sequential_n, logdir, sequential=True)
    data["celery_hops_one_at_a_time"] = hops
    log(f"3 Celery hops, one at a time: {hops['per_trial'] * 1000:.1f} ms")
    for sandbox in sandboxes:
        settings = settings_for(workdir, broker, database, sandbox)
        best_rate = None
        for c in concurrencies:
            key = f"{sandbox}-c{c}"
            floor = run_floor(settings, sandbox, c, trials, logdir)
            log(f"floor {key}: {floor['per_trial'] * 1000:.1f} ms/trial")
            study = run_study(settings, c, trials, workdir, logdir)
            log(f"study {key}: {study['per_trial'] * 1000:.1f} ms/trial, {study['outcomes']}")
            data["runs"][key] = {"floor": floor, "study": study}
            wrong = {k: v for k, v in study["outcomes"].items() if k != "correct"}
            figures.append(Figure(
                f"overhead per trial (pipelined), {sandbox}, {c} worker process(es) per queue",
                study["per_trial"], "s", target=TARGETS[sandbox], reference=f"floor "
                f"({floor['per_trial'] * 1000:.1f} ms: 3 Celery hops + raw {sandbox} start, "
                "same layout, pipelined)",
                ratio=ratio(study["per_trial"], floor["per_trial"]),
                note=(f"outcomes {study['outcomes']}" if wrong else
                      "the floor has no agent process or agent sandbox; see the "
                      "one-at-a-time breakdown for those parts"),
                extra={"study": study, "floor": floor}))
            figures.append(Figure(f"throughput (Redis path), {sandbox}, {c} worker process(es) "
                                  "per queue", study["trials_per_second"], "trials/s"))
            if best_rate is None or study["trials_per_second"] > best_rate[0]:
                best_rate = (study["trials_per_second"], c)
        one = run_study(settings, 1, sequential_n, workdir, logdir, sequential=True)
        data["one_at_a_time"][sandbox] = one
        log(f"one at a time {sandbox}: {one['latency_seconds'] * 1000:.1f} ms/trial")
        figures.append(breakdown_figure(sandbox, one, floor_parts(
            hops["per_trial"], raw, agent_cost, sandbox, settings.agent_sandbox)))
        embedded = run_embedded(workdir, sandbox, trials)
        data["embedded"][sandbox] = embedded
        log(f"embedded {sandbox}: {embedded['trials_per_second']:.1f} trials/s, "
            f"{embedded['outcomes']}")
        wrong = {k: v for k, v in embedded["outcomes"].items() if k != "correct"}
        figures.append(Figure(
            f"embedded default trial rate, {sandbox} ({embedded['layout']}, SQLite)",
            embedded["trials_per_second"], "trials/s", target=EMBEDDED_TARGET, at_least=True,
            reference=f"the Redis path's best rate in this run ({best_rate[0]:.1f} trials/s, "
                      f"{best_rate[1]} process(es) per queue, {db_kind})",
            ratio=ratio(embedded["trials_per_second"], best_rate[0]),
            note=f"outcomes {embedded['outcomes']}" if wrong else "",
            extra={"embedded": embedded}))
    for name, value in (("3 Celery hops, no sandbox, one at a time", hops["per_trial"]),
                        *((f"raw {k} start (one at a time, mean)", v) for k, v in raw.items()),
                        ("the scripted no-op agent's process (mean)", agent_cost)):
        figures.append(Figure(f"floor part: {name}", value, "s"))
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
