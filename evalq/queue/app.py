"""The Celery app: three queues (agents, grading, results) and settings for hour-long trials.

`celery -A evalq.queue.app worker -Q agents` works as well as `evalq worker --queues agents`.
With no EVALQ_BROKER_URL, the broker is a folder under EVALQ_HOME read through
evalq.queue.filebus (kombu's filesystem transport, woken by inotify instead of polling): the
embedded default, with no server at all.
"""

from __future__ import annotations

from kombu import Exchange, Queue

from celery import Celery

from evalq.config import Settings, load_settings
from evalq.urls import mask_log_records

#: the embedded default's kombu transport (evalq.queue.filebus), by import path
EMBEDDED_TRANSPORT = "evalq.queue.filebus:Transport"
QUEUES = ("agents", "grading", "results")
ROUTES = {
    "evalq.run_trial": {"queue": "agents"},
    "evalq.grade_trial": {"queue": "grading"},
    "evalq.record_result": {"queue": "results"},
}


def broker_options(settings: Settings, create: bool = False) -> tuple[str, dict]:
    """Broker URL and transport options; the visibility timeout is set everywhere Celery reads it.

    The embedded broker's folders are made only when `create` is asked for: importing the app
    (a worker, `evalq --help`) must not write under EVALQ_HOME."""
    if settings.embedded:
        from evalq.queue.filebus import folders, transport_options

        root = settings.home / "broker"
        if create:
            for folder in folders(root).values():
                folder.mkdir(parents=True, exist_ok=True)
        # the URL names the stock transport for anyone reading it; `broker_transport` (set in
        # configure) swaps in the one that wakes on new files instead of polling
        return "filesystem://", transport_options(root)
    timeout = settings.visibility_seconds
    # kombu sweeps for expired unacked messages every interval x throttle seconds (100 s by
    # default); keep the sweep well inside the visibility timeout so it means what it says.
    interval = max(1, min(10, timeout // 4))
    return settings.broker_url, {"visibility_timeout": timeout,
                                 "unacked_restore_interval": interval,
                                 "unacked_restore_throttle": 1}


def configure(app: Celery, settings: Settings | None = None, create: bool = True) -> Celery:
    """Point `app` at the broker of `settings` (and make the embedded broker's folders)."""
    settings = settings or load_settings()
    url, options = broker_options(settings, create)
    app.conf.update(
        broker_url=url,
        broker_transport=EMBEDDED_TRANSPORT if settings.embedded else None,
        broker_transport_options=options,
        result_backend=None,
        result_backend_transport_options={"visibility_timeout": settings.visibility_seconds},
        visibility_timeout=settings.visibility_seconds,
        task_ignore_result=True,
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        broker_connection_retry_on_startup=True,
        broker_connection_retry=True,
        broker_connection_max_retries=None,
        task_routes=ROUTES,
        task_queues=[Queue(name, Exchange(name, type="direct"), routing_key=name)
                     for name in QUEUES],
        task_default_queue="agents",
        task_track_started=True,
        task_send_sent_event=False,  # one PUBLISH per message; Flower sees tasks when received
        worker_send_task_events=True,
        worker_enable_remote_control=not settings.embedded,
        worker_hijack_root_logger=False,
        broker_pool_limit=4,
    )
    return app


#: Workers import the task module named in `include` when they start; the app itself does not,
#: so senders (the launcher, ops) never load the runner or the grader.
app = configure(Celery("evalq", include=["evalq.queue.tasks"]), create=False)
mask_log_records()  # `celery -A evalq.queue.app` and Flower too: no password in a log line
