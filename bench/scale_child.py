"""Scale measurements, each in a fresh process so its peak memory (bench.peak) is its own.

    python -m bench.scale_child plan   STUDY_TOML            (EVALQ_* settings in the environment)
    python -m bench.scale_child plan-no-rows STUDY_TOML  (the same, writing no row)
    python -m bench.scale_child seed   STUDY_ID TASKS REPS   (inserts trials + attempts directly)
    python -m bench.scale_child report STUDY_ID OUT_DIR [--traced] [--command [--transcripts]]
    python -m bench.scale_child floor-push           (the launch's own messages pushed again)
    python -m bench.scale_child floor-copy STUDY_ID  (the launch's rows COPied, then undone)
    python -m bench.scale_child floor-read STUDY_ID  (the report's rows, one query, into numpy)

Prints one JSON object: seconds per phase, peak RSS and tracemalloc's peak of Python objects.
"""

from __future__ import annotations

import json
import random
import sys
import time
import tracemalloc
from pathlib import Path

from bench.peak import peak_rss_mib as _peak_rss_mib




def plan(manifest: str) -> dict:
    from evalq.config import load_settings
    from evalq.queue.launch import launch_study, prepare_study
    from evalq.study.manifest import load_manifest
    from evalq.study.order import plan_trials
    from evalq.queue.app import app, configure

    settings = load_settings()
    configure(app, settings)
    times: dict[str, float] = {}
    t0 = time.perf_counter()
    study = load_manifest(manifest)
    times["load_and_verify_fixtures"] = time.perf_counter() - t0
    m = study.manifest
    t = time.perf_counter()
    planned = plan_trials(study.id, [f.id for f in study.fixtures],
                          [c.name for c in m.conditions], m.repetitions, m.seed)
    times["plan_only"] = time.perf_counter() - t
    t = time.perf_counter()
    prepared = prepare_study(study, settings)
    times["prepare (freeze check, publish fixtures, plan)"] = time.perf_counter() - t
    t = time.perf_counter()
    summary = launch_study(app, prepared, resume=False)
    times["launch (write study, trials and attempts while building messages; send them)"] = \
        time.perf_counter() - t
    # plan_only repeats, for its own figure, the plan that register makes: not in the total
    times["total"] = time.perf_counter() - t0 - times["plan_only"]
    return {"trials": len(planned), "sent": summary.sent, "seconds": times,
            "peak_rss_mib": _peak_rss_mib()}


def plan_no_rows(manifest: str) -> dict:
    """What the launch would take if the database cost nothing: the same load, prepare,
    messages and pushes as `plan`, with no study, trial or attempt row written. Not a way to
    launch (workers would find no rows); the figure that shows how much of the push floor's
    2x budget planning and building messages use up by themselves."""
    import redis

    from evalq.config import load_settings
    from evalq.queue.app import app, configure
    from evalq.queue.launch import first_sends, prepare_study, send_run_messages
    from evalq.study.manifest import load_manifest

    settings = load_settings()
    configure(app, settings)
    started = time.perf_counter()
    prepared = prepare_study(load_manifest(manifest), settings)
    sent = send_run_messages(app, prepared.study, first_sends(prepared),
                             lambda start, stop: None)
    seconds = time.perf_counter() - started
    queued = redis.Redis.from_url(settings.broker_url).llen("agents")
    redis.Redis.from_url(settings.broker_url).delete("agents")
    if queued != sent:
        raise RuntimeError(f"plan-no-rows queued {queued} of {sent} messages")
    return {"sent": sent, "seconds": seconds}


def seed(study_id: str, tasks: int, reps: int) -> dict:
    """A finished study of tasks × 2 conditions × reps, written with evalq.results.store's tables."""
    from sqlalchemy import insert

    from evalq.config import load_settings
    from evalq.results.store import AttemptRow, StudyRow, TrialRow, init_db, save_study

    engine = init_db(load_settings().database_url)
    started = time.perf_counter()
    manifest = {"id": study_id, "seed": 1, "repetitions": reps, "mode": "controlled",
                "conditions": [{"name": "baseline", "agent": "scripted"},
                               {"name": "candidate", "agent": "scripted"}]}
    study = StudyRow(id=study_id, manifest=manifest, lock={"lock_digest": "sha256:bench"},
                     lock_digest="sha256:bench", mode="controlled")
    trials, attempts = [], []
    rng = random.Random(1)
    outcomes = ["correct", "incorrect", "timed_out", "grading_failure", "infrastructure_failure"]
    weights = [55, 35, 5, 3, 2]
    now = time.time()
    for task in range(tasks):
        fixture = f"task-{task:04d}"
        for condition in ("baseline", "candidate"):
            for rep in range(1, reps + 1):
                trial_id = f"{study_id}/{fixture}/{condition}/r{rep}"
                trials.append(TrialRow(id=trial_id, study_id=study_id, fixture_id=fixture,
                                       fixture_digest="sha256:x", fixture_ref="sha256:x",
                                       condition=condition, repetition=rep, block=rep - 1,
                                       order_index=len(trials)))
                attempts.append(dict(
                    trial_id=trial_id, study_id=study_id, attempt=1, state="done",
                    outcome=rng.choices(outcomes, weights)[0], claims=1, regrades=0,
                    worker_host="bench", enqueued_at=now, started_at=now, finished_at=now,
                    metrics={"input_tokens": 1000, "output_tokens": 200, "cached_tokens": None},
                    artifacts={"workspace": "sha256:x"}))
    save_study(engine, study, trials)
    with engine.begin() as conn:
        for start in range(0, len(attempts), 5000):
            conn.execute(insert(AttemptRow.__table__), attempts[start:start + 5000])
    return {"attempts": len(attempts), "seconds": time.perf_counter() - started}


def report(study_id: str, out_dir: str, traced: bool, command: bool = False,
           transcripts: bool | None = None) -> dict:
    """compute_report + JSON and Markdown files; `traced` adds tracemalloc (slower, for its
    peak); `command` does what `evalq report STUDY --out OUT_DIR` does instead: the three
    formats (HTML too) and the transcript pages it writes by default (`transcripts` True:
    what `--transcripts` adds, a page per run)."""
    from evalq.config import load_settings
    from evalq.report.compute import compute_report
    from evalq.report.write import write_reports
    from evalq.results.store import init_db

    settings = load_settings()
    engine = init_db(settings.database_url)
    if traced:
        tracemalloc.start()
    started = time.perf_counter()
    computed = compute_report(engine, study_id)
    computed_at = time.perf_counter()
    if command:
        from evalq.cli.run_cmd import write_study_report

        paths = write_study_report(engine, settings, study_id, Path(out_dir), report=computed,
                                   transcripts=transcripts)
    else:
        paths = write_reports(computed, Path(out_dir), ("json", "md"))
    finished = time.perf_counter()
    result = {"attempts": computed["trials"]["finished"], "seconds": finished - started,
              "compute_seconds": computed_at - started,
              "render_and_write_seconds": finished - computed_at,
              "peak_rss_mib": _peak_rss_mib(), "files": {k: str(v) for k, v in paths.items()},
              "transcript_pages": sum(1 for _ in (Path(out_dir) / "transcripts").glob("*.html"))
              if (Path(out_dir) / "transcripts").is_dir() else 0}
    if traced:
        result["tracemalloc_peak_mib"] = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    return result


def floor_push() -> dict:
    """The plan's floor: the launch's own run_trial messages, taken off the agents list where
    the launch left them (so built before the clock starts, each its real size), pushed back by
    the launcher's own pipelined pusher (evalq.queue.publish); everything evalq does beyond
    this (planning, the database, building messages) is overhead. Then the least building:
    least_build."""
    import redis

    from evalq.config import load_settings
    from evalq.queue.app import app, configure
    from evalq.queue.publish import Batch

    settings = load_settings()
    configure(app, settings)
    client = redis.Redis.from_url(settings.broker_url)
    texts = [m.decode() for m in reversed(client.lrange("agents", 0, -1))]  # oldest first
    client.delete("agents")
    with app.producer_or_acquire() as producer:
        sender = Batch(app, producer, producer.channel)
        started = time.perf_counter()
        for text in texts:
            sender.push_text("agents", text)
        sender.flush()
        seconds = time.perf_counter() - started
    queued = client.llen("agents")
    client.delete("agents")
    if queued != len(texts) or not texts:
        raise RuntimeError(f"floor-push queued {queued} of {len(texts)} messages")
    return {"messages": len(texts), "seconds": seconds, "peak_rss_mib": _peak_rss_mib(),
            "least_build_seconds": least_build(texts[0], len(texts))}


def least_build(model: str, count: int) -> float:
    """Seconds to build `count` messages like `model` with the least work CPython allows per
    message: the body's JSON by one substitution of the trial id, one base64, the envelope by
    one str.format with two fresh ids from random bytes drawn beforehand. Not evalq's code and
    not a launcher (the texts are thrown away): what no launcher in CPython can go below,
    however it plans and whatever it writes to the database."""
    import base64
    import os

    message = json.loads(model)
    body = base64.b64decode(message["body"]).decode()
    args = json.loads(body)[0][0]
    trial_id, task_id, tag = (args["trial_id"], message["headers"]["id"],
                              message["properties"]["delivery_tag"])
    marks = {"body": message["body"], "id": task_id, "tag": tag,
             "argsrepr": message["headers"]["argsrepr"],
             "shadow": message["headers"]["shadow"]}
    form = model.replace("{", "{{").replace("}", "}}")
    for name, value in marks.items():
        form = form.replace(f'"{value}"', f'"{{{name}}}"')
    hexes = os.urandom(32 * count).hex()
    b64 = base64.b64encode
    started = time.perf_counter()
    for i in range(count):
        new_id = f"{trial_id}.{i}"
        h = hexes[64 * i:64 * i + 64]
        form.format(body=b64(body.replace(trial_id, new_id).encode()).decode(),
                    id=f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}",
                    tag=f"{h[32:40]}-{h[40:44]}-{h[44:48]}-{h[48:52]}-{h[52:]}",
                    argsrepr=f"{new_id}#1", shadow=f"run_trial {new_id}#1")
    return time.perf_counter() - started


def floor_copy(study_id: str) -> dict:
    """The database's part of the plan's floor: the very trial and attempt rows the launch of
    `study_id` wrote, as COPY text built before the clock starts, COPied into the same tables
    in one transaction (indexes and the attempts' foreign key included) and rolled back."""
    import io

    from evalq.config import load_settings
    from evalq.results.store import init_db

    engine = init_db(load_settings().database_url)
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        buffers = {}
        for table in ("trials", "attempts"):
            text = io.BytesIO()
            columns = "*" if table == "trials" else \
                "trial_id, study_id, attempt, state, enqueued_at, claims, regrades, updated_at"
            cursor.copy_expert(f"COPY (SELECT {columns} FROM {table} WHERE study_id = "
                               f"'{study_id}') TO STDOUT", text)
            buffers[table] = (columns, text.getvalue())
        cursor.execute("DELETE FROM attempts WHERE study_id = %s", (study_id,))
        cursor.execute("DELETE FROM trials WHERE study_id = %s", (study_id,))
        started = time.perf_counter()
        for table, (columns, data) in buffers.items():
            into = table if columns == "*" else f"{table} ({columns})"
            cursor.copy_expert(f"COPY {into} FROM STDIN", io.BytesIO(data), size=len(data))
        seconds = time.perf_counter() - started
        rows = {t: data.count(b"\n") for t, (_, data) in buffers.items()}
        raw.rollback()  # the launch's own rows stay as they were
    finally:
        raw.close()
    return {"rows": rows, "seconds": seconds}


def floor_read(study_id: str) -> dict:
    """The report's floor: every trial and attempt row of the study (all the columns the report
    reads, JSON decoded by the driver) by one SQL query, into one numpy array per column."""
    import numpy as np

    from evalq.config import load_settings
    from evalq.results.store import init_db

    engine = init_db(load_settings().database_url)
    started = time.perf_counter()
    with engine.connect() as conn:
        cursor = conn.connection.cursor()
        cursor.execute(
            "SELECT t.*, a.* FROM trials t LEFT JOIN attempts a ON a.trial_id = t.id "
            "WHERE t.study_id = %s ORDER BY t.order_index, a.attempt", (study_id,))
        rows = cursor.fetchall()
        names = [d[0] for d in cursor.description]
        cursor.close()
    columns = {}
    for i, values in enumerate(zip(*rows)):  # numbers as floats, the rest (text, JSON) objects
        numeric = {type(v) for v in values} <= {int, float}
        columns[f"{i}:{names[i]}"] = np.fromiter(values, dtype=float if numeric else object,
                                                 count=len(values))
    seconds = time.perf_counter() - started
    return {"rows": len(rows), "columns": len(columns), "seconds": seconds,
            "peak_rss_mib": _peak_rss_mib()}


def main(argv: list[str]) -> None:
    command, *args = argv
    if command == "plan":
        result = plan(args[0])
    elif command == "plan-no-rows":
        result = plan_no_rows(args[0])
    elif command == "seed":
        result = seed(args[0], int(args[1]), int(args[2]))
    elif command == "report":
        result = report(args[0], args[1], "--traced" in args, "--command" in args,
                        True if "--transcripts" in args else None)
    elif command == "floor-push":
        result = floor_push()
    elif command == "floor-copy":
        result = floor_copy(args[0])
    elif command == "floor-read":
        result = floor_read(args[0])
    else:
        raise SystemExit(f"unknown command {command!r}: use plan, plan-no-rows, seed, report, floor-push, "
                         "floor-copy or floor-read")
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
