"""One run's side of the gateway: its allowlist, key, budgets and the records of its requests.

The gateway's loop thread writes; the worker's threads read `records()`, `totals()` and
`exhausted` at any time, so both go through one lock.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from evalq.workers.gateway.budgets import BudgetMeter, RunBudgets
from evalq.workers.gateway.records import Record, capped, totals
from evalq.workers.gateway.slots import Waiters
from evalq.workers.gateway.upstreams import Upstream

log = logging.getLogger("evalq.gateway")
#: model calls of one run in flight at once when it has a token or cost budget. Those budgets
#: are only charged once a reply is in, so every call admitted meanwhile can overshoot them:
#: unbounded, a run firing 500 calls at once spends 500 calls' worth past its budget. The
#: rest wait (not refused) and are admitted, or refused, once earlier ones are charged.
MAX_IN_FLIGHT_BUDGETED = 4
#: requests one run may send through its door. Each is a Record kept in the worker's memory
#: (and a digest for retries); the gateway answers refused ones itself at thousands a second,
#: so without a bound an agent looping on a refusal for an hour would exhaust the worker
#: that holds every other run. Past it, nothing more is served and the run is stopped.
MAX_REQUESTS_PER_RUN = 20_000
#: bytes of one run's wire records (JSON lines) kept for its artifact; past it a marker says
#: how many were cut (each record's agent-chosen fields are bounded too: records.py)
MAX_WIRE_ARTIFACT_BYTES = 8 * 1024 * 1024


class GatewayRun:
    """Handle on one open run; made by `Gateway.open_run`, never directly."""

    def __init__(self, gateway: Any, run_id: str, socket_path: Path,
                 upstreams: Sequence[Upstream], credentials: Mapping[str, str],
                 budgets: RunBudgets, concurrency: Optional[int],
                 on_exhausted: Optional[Callable[[str], None]],
                 models: Optional[frozenset[str]] = None):
        missing = [u.credential for u in upstreams
                   if u.credential and not credentials.get(u.credential)]
        if missing:
            raise ValueError(f"run {run_id}: no value for credential(s) {', '.join(missing)}; "
                             "pass them in credentials (evalq.workers.secrets.credentials)")
        if concurrency is not None and concurrency < 1:
            raise ValueError(f"run {run_id}: concurrency={concurrency} must be 1 or more "
                             "(or None: no limit)")
        self.gateway = gateway
        self.run_id = run_id
        self.socket_path = socket_path
        self.upstreams = tuple(upstreams)
        self.credentials = dict(credentials)
        self.secrets = sorted({v for v in self.credentials.values() if v}, key=len,
                              reverse=True)
        self.concurrency = concurrency
        #: the models a model call may name (the condition's pinned and allowed ones); None: any
        self.models = models
        self.meter = BudgetMeter(budgets, gateway.price_table)
        budgeted = budgets.max_tokens is not None or budgets.max_cost_usd is not None
        self.model_calls: Optional[asyncio.Semaphore] = \
            asyncio.Semaphore(MAX_IN_FLIGHT_BUDGETED) if budgeted else None
        #: model calls waiting for one of those places (tests wait for a count)
        self.waiting = Waiters()
        self.on_exhausted = on_exhausted
        #: Why the run may make no more model calls (a budget spent), or None.
        self.exhausted: Optional[str] = None
        self.closed = False
        self.http_server: Any = None   # set by the gateway once the socket listens
        self.listener: Any = None
        self.in_flight: set[Any] = set()  # the loop's tasks answering this run's requests
        self._records: list[Record] = []
        self._seen: set[bytes] = set()
        self._count = 0
        self._arrived = 0
        self._lock = threading.Lock()

    # ------------------------------------------------------------ read by the worker
    def records(self) -> list[dict[str, Any]]:
        """Every finished request so far, in arrival order, as plain dicts (up to
        MAX_WIRE_ARTIFACT_BYTES of them, then a marker)."""
        with self._lock:
            ordered = sorted(self._records, key=lambda r: r.index)
        return capped([r.as_dict() for r in ordered], MAX_WIRE_ARTIFACT_BYTES)

    def totals(self) -> dict[str, Any]:
        """Counts and token/cost sums; a sum is None when any billed model call lacks it."""
        with self._lock:
            out = totals(self._records)
        out["exhausted"] = self.exhausted
        return out

    def close(self) -> None:
        """Stop listening, end requests in flight (recorded as such, their provider slots
        freed), remove the socket. Records stay readable."""
        self.gateway.close_run(self)

    # ------------------------------------------------------------ used by the proxy
    def next_index(self) -> int:
        with self._lock:
            self._count += 1
            return self._count

    def over_cap(self) -> bool:
        """Whether this request is past MAX_REQUESTS_PER_RUN (then it is neither served nor
        recorded, and the run is stopped, once)."""
        with self._lock:
            self._arrived += 1
            over = self._arrived > MAX_REQUESTS_PER_RUN
        if over:
            self.spend(f"requests through the door over {MAX_REQUESTS_PER_RUN}")
        return over

    def seen_before(self, method: str, path: str, body: bytes) -> bool:
        digest = hashlib.sha256(method.encode() + b" " + path.encode() + b"\n" + body).digest()
        with self._lock:
            seen = digest in self._seen
            self._seen.add(digest)
        return seen

    def add(self, record: Record) -> None:
        with self._lock:
            self._records.append(record)

    def spend(self, reason: str) -> None:
        """Mark the run exhausted (once) and tell the worker through its callback."""
        if self.exhausted is not None:
            return
        self.exhausted = reason
        log.info("gateway run %s exhausted: %s", self.run_id, reason)
        if self.on_exhausted is not None:
            self.gateway.notify(self.on_exhausted, reason)
