"""A model call still in flight when a run's door closes may be billed by the provider, and
its usage is never read: the run's wire totals are unavailable (None, with the reason), not
the sum of the calls that finished (which would read 0 for a run whose only call was cut)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from gateway_support import gateway, send, sock_dir  # noqa: F401 (fixtures)
from evalq.models import RunMetrics
from evalq.modelserver import ModelServer
from evalq.modelserver.script import parse_script
from evalq.workers.gateway import RunBudgets, Upstream
from evalq.workers.wire import record_wire

BODY = {"model": "claude-sonnet-4-5", "max_tokens": 100,
        "messages": [{"role": "user", "content": "go"}]}
USAGE = {"input_tokens": 10, "output_tokens": 2, "cache_read_tokens": 0,
         "cache_write_tokens": 0}


def test_a_call_cut_at_close_makes_the_wire_totals_unavailable(gateway, sock_dir):
    gate = threading.Event()
    with ModelServer(parse_script({"fallback": {"text": "ok", "usage": USAGE}}),
                     gate=gate) as server:
        run = gateway.open_run("cut", sock_dir / "g.sock", upstreams=[Upstream(server.url)],
                               budgets=RunBudgets(max_cost_usd=5.0))
        replies: list = []
        agent = threading.Thread(target=lambda: replies.append(
            _try(lambda: send(str(sock_dir / "g.sock"), "/v1/messages", BODY))))
        agent.start()
        try:
            assert server.wait_in_flight(1)  # the provider has it: it may bill it
            run.close()
        finally:
            gate.set()
            agent.join(30)
    (record,) = run.records()
    assert record["cut_at_close"] is True and record["error"]
    totals = run.totals()
    assert totals["model_calls"] == 1
    for key in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
                "cost_usd"):
        assert totals[key] is None, key  # unavailable, not 0
    assert totals["unavailable"].startswith("model call 1 was in flight when the run closed")
    result = SimpleNamespace(metrics=RunMetrics(), extra={})
    record_wire(result, run)
    assert result.metrics.wire_input_tokens is None and result.metrics.wire_cost_usd is None
    assert result.metrics.unreported["wire_cost_usd"] == totals["unavailable"]


def test_a_run_closed_with_nothing_in_flight_keeps_its_totals(gateway, sock_dir):
    with ModelServer(parse_script({"fallback": {"text": "ok", "usage": USAGE}})) as server:
        run = gateway.open_run("done", sock_dir / "g.sock", upstreams=[Upstream(server.url)])
        assert send(str(sock_dir / "g.sock"), "/v1/messages", BODY).status == 200
        run.close()
    totals = run.totals()
    assert totals["unavailable"] is None and totals["input_tokens"] == 10
    assert totals["cost_usd"] > 0


def _try(call):
    try:
        return call()
    except OSError as exc:  # the door closed under the agent: what it sees is its business
        return exc
