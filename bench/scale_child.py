"""Scale measurements, each in a fresh process so its peak memory (ru_maxrss) is its own.

    python -m bench.scale_child plan   STUDY_TOML            (EVALQ_* settings in the environment)
    python -m bench.scale_child seed   STUDY_ID TASKS REPS   (inserts trials + attempts directly)
    python -m bench.scale_child report STUDY_ID OUT_DIR [--traced]

Prints one JSON object: seconds per phase, peak RSS and tracemalloc's peak of Python objects.
"""

from __future__ import annotations

import json
import random
import resource
import sys
import time
import tracemalloc
from pathlib import Path


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def plan(manifest: str) -> dict:
    from evalq.config import load_settings
    from evalq.queue.launch import register_study, send_trials
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
    engine, _, _ = register_study(study, settings)
    times["register (freeze check, publish fixtures, plan, insert trials)"] = \
        time.perf_counter() - t
    t = time.perf_counter()
    summary = send_trials(app, study, engine, resume=False)
    times["send (insert attempts, publish messages)"] = time.perf_counter() - t
    # plan_only repeats, for its own figure, the plan that register makes: not in the total
    times["total"] = time.perf_counter() - t0 - times["plan_only"]
    return {"trials": len(planned), "sent": summary.sent, "seconds": times,
            "peak_rss_mib": _peak_rss_mib()}


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


def report(study_id: str, out_dir: str, traced: bool) -> dict:
    """compute_report + JSON and Markdown files; `traced` adds tracemalloc (slower, for its peak)."""
    from evalq.config import load_settings
    from evalq.report.compute import compute_report
    from evalq.report.write import write_reports
    from evalq.results.store import init_db

    engine = init_db(load_settings().database_url)
    if traced:
        tracemalloc.start()
    started = time.perf_counter()
    computed = compute_report(engine, study_id)
    computed_at = time.perf_counter()
    paths = write_reports(computed, Path(out_dir), ("json", "md"))
    finished = time.perf_counter()
    result = {"attempts": computed["trials"]["finished"], "seconds": finished - started,
              "compute_seconds": computed_at - started,
              "render_and_write_seconds": finished - computed_at,
              "peak_rss_mib": _peak_rss_mib(), "files": {k: str(v) for k, v in paths.items()}}
    if traced:
        result["tracemalloc_peak_mib"] = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    return result


def main(argv: list[str]) -> None:
    command, *args = argv
    if command == "plan":
        result = plan(args[0])
    elif command == "seed":
        result = seed(args[0], int(args[1]), int(args[2]))
    elif command == "report":
        result = report(args[0], args[1], "--traced" in args)
    else:
        raise SystemExit(f"unknown command {command!r}: use plan, seed or report")
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
