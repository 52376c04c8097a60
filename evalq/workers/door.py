"""The door out of an agent sandbox: a run of this worker's model gateway.

Inside, the agent finds it at http://127.0.0.1:PORT: a socket listening in the sandbox's own
network namespace (made there by the worker, or by the sandbox's prelude and handed over:
evalq/workers/sandbox/netns_door.py, handoff.py), whose connections this gateway accepts
itself: no process of evalq's per run relays them. Behind it the gateway (evalq/workers/gateway/) allows only the run's upstream, and there only
the model calls of the agent's provider API (no reads of the provider account), puts the real
credential on each request (the agent holds a placeholder), meters every request on the wire
and refuses requests once a budget is spent. One gateway serves every run of a worker process:
it is made on first use, so a forked pool child makes its own.
"""

from __future__ import annotations

import threading
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, Optional

from evalq.errors import InfrastructureError
from evalq.workers.gateway import Gateway, GatewayRun, RunBudgets, Upstream

_gateway: Optional[Gateway] = None
_gateway_lock = threading.Lock()


def worker_gateway() -> Gateway:
    """This process's gateway; with a Redis broker, provider concurrency is shared across
    every worker through it."""
    global _gateway
    with _gateway_lock:
        if _gateway is None:
            from evalq.config import load_settings

            broker = load_settings().broker_url
            _gateway = Gateway(redis_url=broker if broker and broker.startswith(
                ("redis://", "rediss://")) else None)
        return _gateway


@dataclass
class Door:
    """An open door: the gateway's run behind it (AgentJob.door)."""

    run: GatewayRun


@contextmanager
def open_door(upstream_base_url: str, credentials: Optional[dict[str, str]] = None, *,
              auth: str = "bearer", api: str = "any",
              budgets: Optional[RunBudgets] = None,
              concurrency: Optional[int] = None,
              on_exhausted: Optional[Callable[[str], None]] = None,
              models: Optional[frozenset[str]] = None) -> Iterator[Door]:
    """A gateway run to `upstream_base_url` for the block; its records stay readable after.

    `credentials` ({name: value}) stay here: the first one is what the gateway sends upstream
    in the `auth` style ("x-api-key" for Anthropic, "bearer" for OpenAI-style endpoints).
    `api` ("anthropic", "openai", "any") names the model calls the door lets through; the
    upstream is served at its own path, as the sandbox's model URL keeps it."""
    names = list(credentials or {})
    try:
        upstream = Upstream(upstream_base_url, auth=auth if names else "none",
                            credential=names[0] if names else None, api=api)
    except ValueError as exc:
        raise InfrastructureError(f"the condition's model endpoint: {exc}") from None
    run = worker_gateway().open_run(f"run-{uuid.uuid4().hex}", None, [upstream], credentials=credentials or {},
                                    budgets=budgets, concurrency=concurrency,
                                    on_exhausted=on_exhausted, models=models)
    try:
        yield Door(run)
    finally:
        run.close()
