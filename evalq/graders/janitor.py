"""The workers' janitor: sweeps what crashed gradings and agent runs left behind, at start and
every SWEEP_EVERY seconds.

A grading worker killed mid-run leaves a container (Docker), or a cgroup and a size-capped
tmpfs (bubblewrap), and its grading folder in the temp dir. Each backend's `sweep` removes its own orphans: containers past the
deadline written on them, cgroups and tmpfs mounts whose owning process is gone, and anything
older than ORPHAN_AGE_SECONDS. An agent worker sweeps its agent sandbox backend the same way
(evalq/workers/sandbox/: bwrap cgroups named after their worker process, labelled containers).
It runs in the worker's main process, in a daemon thread, for each of the grading and agents
queues the worker consumes.
"""

from __future__ import annotations

import logging
import threading

from celery import signals

log = logging.getLogger("evalq.janitor")

SWEEP_EVERY = 600.0
ORPHAN_AGE_SECONDS = 6 * 3600.0


def sweep_once(sandbox) -> int:
    """One sweep with the backend's own rules; failures are logged, never raised (best effort)."""
    from evalq.graders.sandbox.scratch import sweep_folders

    try:
        # the backend's own first: bwrap's tmpfs mounts come off before their folders go
        removed = sandbox.sweep(max_age_seconds=ORPHAN_AGE_SECONDS)
        removed += sweep_folders(ORPHAN_AGE_SECONDS)
    except Exception as exc:  # an engine that is down now is swept next time
        log.warning("sandbox sweep (%s) failed, will retry: %s", sandbox.name, exc)
        return 0
    if removed:
        log.warning("sandbox sweep (%s) removed %d leftover(s) of crashed %s",
                    sandbox.name, removed, getattr(sandbox, "phase", "gradings"))
    return removed


def start(sandbox, every: float = SWEEP_EVERY) -> threading.Event:
    """Sweep now and then every `every` seconds until the returned event is set."""
    stop = threading.Event()

    def loop() -> None:
        while True:
            sweep_once(sandbox)
            if stop.wait(every):
                return

    threading.Thread(target=loop, name="evalq-janitor", daemon=True).start()
    return stop


@signals.worker_ready.connect
def _on_worker_ready(sender=None, **_kwargs) -> None:
    app = getattr(sender, "app", None)
    queues = getattr(getattr(getattr(app, "amqp", None), "queues", None), "consume_from", None)
    if not queues:
        return
    from evalq.config import load_settings

    settings = load_settings()
    if "grading" in queues:
        from evalq.graders.sandbox import get_sandbox

        start(get_sandbox(settings.sandbox))
    if "agents" in queues:
        from evalq.workers.sandbox import get_agent_sandbox

        start(get_agent_sandbox(settings.agent_sandbox))
