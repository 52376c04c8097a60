"""The gateway's shared-slot loops log a Redis outage once when it starts (with the reason)
and once when it ends, not a traceback every poll."""

from __future__ import annotations

import logging

from evalq.workers.gateway.slots import _Trouble


def test_an_outage_is_logged_when_it_starts_and_when_it_ends(caplog):
    caplog.set_level(logging.WARNING, logger="evalq")
    trouble = _Trouble("gateway slot notifications interrupted")
    for outage in range(2):
        for _ in range(5):
            try:
                raise ConnectionError("Connection closed by server.")
            except ConnectionError:
                trouble.failed()
        trouble.passed()
        trouble.passed()  # running normally: nothing more to say
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [
        "gateway slot notifications interrupted; retrying quietly until Redis answers",
        "gateway slot notifications interrupted: Redis answers again after 5 failed tries"] * 2
    starts = [r for r in caplog.records if "retrying" in r.getMessage()]
    assert all(r.exc_info and "Connection closed" in str(r.exc_info[1]) for r in starts)
