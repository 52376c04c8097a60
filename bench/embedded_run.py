"""The embedded default's no-op study: what `evalq run` does with no EVALQ_BROKER_URL.

The same LocalWorkers `evalq run` starts (one Celery worker on the filesystem broker, all
three queues), the default SQLite database under its own EVALQ_HOME, and the same no-op study
as the Redis-path runs, timed the same way: first send to last result, workers already up.
"""

from __future__ import annotations

from pathlib import Path

from evalq.config import Settings

from .noop_study import now, pipelined_figures, wait_finished, write_study
from .services import wait_for


def embedded_settings(workdir: Path, sandbox: str) -> Settings:
    """No broker URL and no database URL: the newcomer's defaults, under a fresh home.

    Given as None explicitly: the bench process has EVALQ_BROKER_URL set for the Redis runs."""
    return Settings(home=workdir / "embedded-home", broker_url=None, database_url=None,
                    artifacts_url=None, sandbox=sandbox, max_trial_seconds=600.0,
                    lease_seconds=60.0)


def run_embedded(workdir: Path, sandbox: str, n: int, concurrency: int = 2) -> dict:
    from celery import Celery

    from evalq.queue.app import configure
    from evalq.queue.embedded import LocalWorkers
    from evalq.queue.launch import register_study, send_trials
    from evalq.study.manifest import load_manifest

    settings = embedded_settings(workdir / f"embedded-{sandbox}", sandbox)
    assert settings.embedded, settings.broker_url
    study_id = f"bench-embedded-{sandbox}"
    study = load_manifest(write_study(workdir / study_id, study_id, n))
    # a fresh app: the shared one keeps the connection pool of the Redis runs before this one
    app = configure(Celery("evalq"), settings)
    engine, _, _ = register_study(study, settings)
    workers = LocalWorkers.start(settings, concurrency, loglevel="INFO")
    try:
        def ready() -> bool:
            if workers.check():
                raise RuntimeError(f"an embedded worker exited; see {workers.log_path(0)}")
            return all(workers.log_path(i).exists() and b" ready." in
                       workers.log_path(i).read_bytes() for i in range(len(workers.procs)))

        wait_for(ready, 90, "the embedded workers to log 'ready.'", poll=0.1)
        started = now()
        summary = send_trials(app, study, engine, resume=False)
        wait_finished(engine, study_id, summary.planned, 120 + summary.planned * 10.0)
    finally:
        workers.stop()
    figures = pipelined_figures(engine, study_id, started)
    figures["layout"] = (f"{len(workers.procs)} local worker(s), -c {concurrency}, "
                         "queues agents,grading,results")
    engine.dispose()
    return figures
