"""What every evalq worker sweeps in the background, started when the worker is ready.

* all workers: run folders of this host's killed trials (ops/run_folders.py), at start and
  every RUN_FOLDER_SWEEP_EVERY seconds;
* workers of the grading or results queue: gradings whose grader died (ops/grading_sweep.py).
"""

from __future__ import annotations

import threading

from celery import signals

from evalq.ops.grading_sweep import start_worker_sweep
from evalq.ops.run_folders import sweep_run_folders

RUN_FOLDER_SWEEP_EVERY = 300.0
_stop = threading.Event()


def _run_folder_loop(runs_dir, every: float) -> None:
    while True:
        try:
            sweep_run_folders(runs_dir)
        except OSError:
            pass  # a folder vanishing under us is the goal anyway
        if _stop.wait(every):
            return


@signals.worker_ready.connect
def _on_worker_ready(sender=None, **_kwargs) -> None:
    app = getattr(sender, "app", None)
    queues = getattr(getattr(getattr(app, "amqp", None), "queues", None), "consume_from", None)
    start_sweeps(queues)


def start_sweeps(queues) -> None:
    """The sweeps of a worker serving `queues` (also the Redis results worker, results/drain.py)."""
    from evalq.config import load_settings
    from evalq.ops.recovery import broker_run_id
    from evalq.queue.sending import send
    from evalq.results.store import ready_engine

    settings = load_settings()
    threading.Thread(target=_run_folder_loop, args=(settings.home / "runs",
                                                    RUN_FOLDER_SWEEP_EVERY),
                     name="evalq-run-folder-sweep", daemon=True).start()
    if not queues or not ({"grading", "results"} & set(queues)):
        return
    start_worker_sweep(lambda: ready_engine(settings.database_url), send, settings.lease_seconds,
                       lambda: broker_run_id(settings.broker_url), _stop,
                       broker_url=settings.broker_url)


@signals.worker_shutdown.connect
def _on_worker_shutdown(**_kwargs) -> None:
    stop_sweeps()


def stop_sweeps() -> None:
    _stop.set()
