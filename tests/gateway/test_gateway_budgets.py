"""Budgets are enforced live: once tokens, requests or cost are spent the next model call gets a
429 naming the budget, `run.exhausted` says why and the worker's callback fires once."""

from __future__ import annotations

import threading

import pytest

from gateway_support import gateway, send, sock_dir  # noqa: F401 (fixtures)
from evalq.modelserver import ModelServer
from evalq.modelserver.script import parse_script
from evalq.pricing import load_price_table
from evalq.workers.gateway import RunBudgets, Upstream

USAGE = {"input_tokens": 1000, "output_tokens": 200, "cache_read_tokens": 300,
         "cache_write_tokens": 0}
TURN = {"text": "step", "usage": USAGE}
BODY = {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "go"}]}


class Callback:
    def __init__(self) -> None:
        self.reasons: list[str] = []
        self.called = threading.Event()

    def __call__(self, reason: str) -> None:
        self.reasons.append(reason)
        self.called.set()


def independent_cost(usage: dict) -> float:
    """Dollars at the table's claude-sonnet-4-5 prices, per million tokens."""
    prices = load_price_table().models["claude-sonnet-4-5"]
    return (usage["input_tokens"] * prices["input"] + usage["output_tokens"] * prices["output"]
            + usage["cache_read_tokens"] * prices["cache_read"]
            + usage["cache_write_tokens"] * prices["cache_write"]) / 1_000_000


@pytest.mark.parametrize("budgets,allowed,name", [
    (RunBudgets(max_tokens=2 * 1500 + 1), 3, "tokens"),      # 1500 tokens a call: spent by #3
    (RunBudgets(max_requests=2), 2, "requests"),
    (RunBudgets(max_cost_usd=independent_cost(USAGE) * 1.5), 2, "cost")])
def test_a_spent_budget_refuses_the_next_call(budgets, allowed, name, gateway, sock_dir):
    callback = Callback()
    with ModelServer(parse_script({"turns": [TURN] * 5})) as server:
        run = gateway.open_run("b", sock_dir / "g.sock", upstreams=[Upstream(server.url)],
                               budgets=budgets, on_exhausted=callback)
        for _ in range(allowed):
            assert run.exhausted is None
            assert send(str(sock_dir / "g.sock"), "/v1/messages", BODY).status == 200
        # the last allowed reply has ended: the budget is spent before the agent can ask again
        assert run.exhausted is not None and run.exhausted.startswith(f"{name} budget spent")
        for _ in range(2):
            refused = send(str(sock_dir / "g.sock"), "/v1/messages", BODY)
            assert refused.status == 429
            assert refused.json()["budget"] == name
            assert refused.json()["error"]["type"] == "budget_exhausted"
            assert refused.headers["x-should-retry"] == "false"
        # requests that are not model calls are not budgeted
        assert send(str(sock_dir / "g.sock"), "/v1/models", method="GET").status == 200
        assert len(server.exchanges) == allowed
        assert callback.called.wait(10) and callback.reasons == [run.exhausted]
        totals = run.totals()
        assert totals["exhausted"] == run.exhausted and totals["refused"] == 2
        assert totals["input_tokens"] == allowed * USAGE["input_tokens"]
        assert totals["cost_usd"] == pytest.approx(allowed * independent_cost(USAGE), abs=1e-9)


def test_an_unmeasurable_token_budget_fails_closed_an_unpriced_cost_is_recorded(gateway,
                                                                              sock_dir):
    turns = [{"text": "a", "usage": USAGE, "no_usage": True}, TURN]
    with ModelServer(parse_script({"turns": turns})) as server:
        run = gateway.open_run("u", sock_dir / "g.sock", upstreams=[Upstream(server.url)],
                               budgets=RunBudgets(max_tokens=10**9))
        assert send(str(sock_dir / "g.sock"), "/v1/messages", BODY).status == 200
        assert run.exhausted == "tokens budget cannot be enforced: request 1 reported no usage"
        assert send(str(sock_dir / "g.sock"), "/v1/messages", BODY).status == 429
        costly = gateway.open_run("c", sock_dir / "c.sock", upstreams=[Upstream(server.url)],
                                  budgets=RunBudgets(max_cost_usd=100.0))
        unknown = {**BODY, "model": "some-model-without-a-price"}
        assert send(str(sock_dir / "c.sock"), "/v1/messages", unknown).status == 200
        assert costly.exhausted is None  # not stopped: its cost is unknown, not spent ...
        assert costly.totals()["unenforced"].startswith("cost budget not enforced from "
                                                        "request 1")  # ... and it says so
        assert send(str(sock_dir / "c.sock"), "/v1/messages", unknown).status == 200
        assert costly.records()[0]["cost_usd"] is None and costly.totals()["cost_usd"] is None


def test_budgets_reject_nonsense():
    with pytest.raises(ValueError, match="max_tokens=0"):
        RunBudgets(max_tokens=0)
