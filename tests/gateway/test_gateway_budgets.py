"""Budgets are enforced live: once tokens, requests or cost are spent the next model call gets a
429 naming the budget, `run.exhausted` says why and the worker's callback fires once."""

from __future__ import annotations

import json
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
        # free calls (token counts) are not budgeted
        assert send(str(sock_dir / "g.sock"), "/v1/messages/count_tokens", BODY).status == 200
        assert len([e for e in server.exchanges if e.api]) == allowed
        assert callback.called.wait(10) and callback.reasons == [run.exhausted]
        totals = run.totals()
        assert totals["exhausted"] == run.exhausted and totals["refused"] == 2
        assert totals["input_tokens"] == allowed * USAGE["input_tokens"]
        assert totals["cost_usd"] == pytest.approx(allowed * independent_cost(USAGE), abs=1e-9)


def test_a_reply_without_usage_is_charged_at_its_worst_case(gateway, sock_dir):
    """Budgets fail closed: a billed reply whose usage is unknown counts at its worst case,
    input one token per request byte, output the request's cap (or the model's limit), at
    the model's prices; the run's totals stay unknown (None), never 0."""
    silent = {"text": "a", "usage": USAGE, "no_usage": True}
    table = load_price_table()
    prices = table.models["claude-sonnet-4-5"]
    with ModelServer(parse_script({"fallback": silent})) as server:
        capped = {**BODY, "max_tokens": 1000}
        size = len(json.dumps(capped).encode())
        tokens = gateway.open_run("t", sock_dir / "t.sock", upstreams=[Upstream(server.url)],
                                  budgets=RunBudgets(max_tokens=2 * (size + 1000) + 1))
        for _ in range(2):
            assert send(str(sock_dir / "t.sock"), "/v1/messages", capped).status == 200
        assert tokens.exhausted is None  # 2 worst cases fit ...
        assert send(str(sock_dir / "t.sock"), "/v1/messages", capped).status == 200
        assert tokens.exhausted == f"tokens budget spent ({3 * (size + 1000)} of " \
            f"{2 * (size + 1000) + 1})"  # ... the third does not
        assert tokens.totals()["input_tokens"] is None  # unknown, not 0, and why
        assert tokens.totals()["why_unknown"]["input_tokens"] == \
            "the reply to model call 1 carried no input_tokens"
        assert tokens.records()[0]["charged"].startswith("at its worst case")
        # no cap in the request: the model's output limit from the table, at its price
        uncapped_size = len(json.dumps(BODY).encode())
        worst = (uncapped_size * max(prices["input"], prices["cache_read"],
                                     prices["cache_write"])
                 + table.max_output["claude-sonnet-4-5"] * prices["output"]) / 1e6
        cost = gateway.open_run("c", sock_dir / "c.sock", upstreams=[Upstream(server.url)],
                                budgets=RunBudgets(max_cost_usd=worst * 1.5))
        assert send(str(sock_dir / "c.sock"), "/v1/messages", BODY).status == 200
        assert cost.exhausted is None
        assert send(str(sock_dir / "c.sock"), "/v1/messages", BODY).status == 200
        assert cost.exhausted == f"cost budget spent (${2 * worst:.6f} of ${worst * 1.5:g})"
        assert cost.totals()["cost_usd"] is None
        # a model with no cap and no known limit cannot be bounded: the budget is spent
        blind = gateway.open_run("b", sock_dir / "b.sock", upstreams=[Upstream(server.url)],
                                 budgets=RunBudgets(max_tokens=10**9))
        assert send(str(sock_dir / "b.sock"), "/v1/messages",
                    {**BODY, "model": "some-model-without-a-price"}).status == 200
        assert blind.exhausted.startswith("tokens budget cannot be enforced: request 1 "
                                          "reported no input_tokens or output_tokens")
        assert send(str(sock_dir / "b.sock"), "/v1/messages", BODY).status == 429


def test_a_cost_budget_refuses_a_model_without_a_price(gateway, sock_dir):
    """Prices match exact ids (and listed aliases): a pro model is not priced as its base
    model, and under a cost budget a call naming it never reaches the provider."""
    with ModelServer(parse_script({"fallback": TURN})) as server:
        run = gateway.open_run("c", sock_dir / "c.sock", upstreams=[Upstream(server.url)],
                               budgets=RunBudgets(max_cost_usd=100.0))
        for model in ("gpt-5-pro", "claude-sonnet-4-5-extra", "GPT-5", "x" * 5000):
            reply = send(str(sock_dir / "c.sock"), "/v1/chat/completions",
                         {"model": model, "messages": []})
            assert reply.status == 403, model
            assert reply.json()["error"]["type"] == "unpriced_model"
            assert "has no price" in reply.json()["error"]["message"]
        for model in ("gpt-5", "claude-sonnet-4-5-20250929", "anthropic/claude-haiku-4-5"):
            assert send(str(sock_dir / "c.sock"), "/v1/messages",
                        {"model": model, "messages": []}).status == 200, model
        assert [e.model for e in server.exchanges] == [
            "gpt-5", "claude-sonnet-4-5-20250929", "anthropic/claude-haiku-4-5"]
        assert run.totals()["cost_usd"] > 0
        # without a cost budget the call goes through, its cost unknown (None)
        free = gateway.open_run("f", sock_dir / "f.sock", upstreams=[Upstream(server.url)])
        assert send(str(sock_dir / "f.sock"), "/v1/messages",
                    {"model": "gpt-5-pro", "messages": []}).status == 200
        assert free.totals()["cost_usd"] is None


def test_prices_match_exact_ids_and_listed_aliases_only():
    table = load_price_table()
    assert table.lookup("gpt-5-pro") == (None, None)
    assert table.lookup("gpt-5-mini-high") == (None, None)
    assert table.lookup("claude-sonnet-4-5-20991231") == (None, None)
    assert table.lookup("openai/gpt-5")[0] == "gpt-5"
    assert table.lookup("claude-haiku-4-5-20251001")[0] == "claude-haiku-4-5"


def test_an_openai_chat_stream_without_usage_gets_it_asked_for(gateway, sock_dir):
    """An agent that streams without stream_options.include_usage would leave its calls
    uncounted: the gateway asks for usage itself, records that it did, and meters it."""
    usage = {"input_tokens": 700, "output_tokens": 50, "cache_read_tokens": 0}
    with ModelServer(parse_script({"fallback": {"text": "hi", "usage": usage}})) as server:
        run = gateway.open_run("s", sock_dir / "s.sock", upstreams=[Upstream(server.url)],
                               budgets=RunBudgets(max_tokens=1000))
        body = {"model": "gpt-5", "stream": True, "stream_options": {"other": 1},
                "messages": [{"role": "user", "content": "go"}]}
        assert send(str(sock_dir / "s.sock"), "/v1/chat/completions", body).status == 200
        assert run.exhausted is None
        assert send(str(sock_dir / "s.sock"), "/v1/chat/completions", body).status == 200
        assert run.exhausted == "tokens budget spent (1500 of 1000)"
        assert [e.body["stream_options"] for e in server.exchanges] == \
            [{"other": 1, "include_usage": True}] * 2
        record = run.records()[0]
        assert record["usage_requested"] is True and record["output_tokens"] == 50
        assert run.totals()["input_tokens"] == 1400


def test_budgets_reject_nonsense():
    with pytest.raises(ValueError, match="max_tokens=0"):
        RunBudgets(max_tokens=0)
