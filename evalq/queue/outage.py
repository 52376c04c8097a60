"""Riding out a broker outage: how long to keep trying, how to wait, and what to log.

A Redis restart, a failover or a cut network makes every call to the broker fail for a while.
Each place that talks to the broker (a hop's send, the results worker, the gateway's slots)
keeps trying for the outage window (`EVALQ_BROKER_RETRY_SECONDS`, five minutes unless set),
backing off up to BACKOFF_MAX seconds between tries, and logs the first failure and the
recovery once each instead of every try. Past the window it gives up with BrokerUnavailable,
and the caller leaves its trial pending in the database, where the sweeps find it again.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Iterator, Optional, TypeVar

from evalq.errors import EvalqError

log = logging.getLogger("evalq.broker")

#: the first pause between tries, doubled each time up to BACKOFF_MAX (seconds)
BACKOFF_START, BACKOFF_MAX = 0.5, 10.0

T = TypeVar("T")


class BrokerUnavailable(EvalqError):
    """The broker stayed unreachable for the whole outage window."""


def broker_errors() -> tuple[type[BaseException], ...]:
    """What a call to an unreachable broker raises (kombu wraps redis-py's errors, or not)."""
    import kombu.exceptions
    import redis

    return (kombu.exceptions.OperationalError, redis.ConnectionError, redis.TimeoutError,
            ConnectionError, TimeoutError, OSError)


def outage_window() -> float:
    """Seconds a broker call keeps trying: EVALQ_BROKER_RETRY_SECONDS."""
    from evalq.config import load_settings

    return load_settings().broker_retry_seconds


def pauses(start: float = BACKOFF_START, most: float = BACKOFF_MAX) -> Iterator[float]:
    """0.5, 1, 2, 4, 8, 10, 10, … seconds."""
    pause = start
    while True:
        yield pause
        pause = min(pause * 2, most)


class Outage:
    """One caller's view of the broker: the first failure of a run of them is logged with its
    reason, the recovery with how long it took; the tries in between are not."""

    def __init__(self, what: str, logger: logging.Logger = log):
        self.what, self.log = what, logger
        self.since: Optional[float] = None
        self.failures = 0

    def failed(self, exc: BaseException) -> None:
        if self.since is None:
            self.since = time.monotonic()
            self.log.warning("%s: broker unreachable (%s: %s); retrying quietly", self.what,
                             type(exc).__name__, exc)
        self.failures += 1

    def passed(self) -> None:
        if self.since is not None:
            self.log.warning("%s: broker reachable again after %.0f s (%d failed tries)",
                             self.what, time.monotonic() - self.since, self.failures)
            self.since, self.failures = None, 0

    def lasted(self) -> float:
        return 0.0 if self.since is None else time.monotonic() - self.since

    def failed_within(self, exc: BaseException, pause: float, window: float) -> None:
        """A failed try of a caller that gives up after `window` seconds: recorded, and
        BrokerUnavailable if pausing `pause` more would outlast the window."""
        self.failed(exc)
        if self.lasted() + pause > window:
            raise BrokerUnavailable(f"{self.what}: the broker was unreachable for "
                                    f"{self.lasted():.0f} s ({type(exc).__name__}: {exc})"
                                    ) from exc


def ride_out(call: Callable[[], T], what: str, window: Optional[float] = None) -> T:
    """`call()`, tried again while the broker is unreachable, for at most `window` seconds
    (outage_window() when None); BrokerUnavailable after that."""
    window = outage_window() if window is None else window
    errors = broker_errors()
    outage = Outage(what)
    for pause in pauses():
        try:
            result = call()
        except errors as exc:
            outage.failed_within(exc, pause, window)
            time.sleep(pause)
            continue
        outage.passed()
        return result
    raise AssertionError("unreachable")  # pauses() never ends
