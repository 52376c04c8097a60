"""The accounting and activation rules every adapter shares: zero-filled usage is not a
report, a partial sum is no sum, and a failed skill call is no activation."""

from __future__ import annotations

from evalq.models import RunMetrics
from evalq.workers.agents.trajectory import Step, build, skill_loaded
from evalq.workers.agents.usage import as_reported, settle


def _usage(i, o, r=None, w=None):
    return {"input_tokens": i, "output_tokens": o, "cache_read_tokens": r, "cache_write_tokens": w}


def test_counts_are_kept_only_when_every_request_reported_them():
    m = RunMetrics()
    settle(m, [_usage(10, 2, 5, 0), _usage(20, 3, 7, 0)], "none",
           zero_means_missing=("cache_write_tokens",))
    assert (m.input_tokens, m.output_tokens, m.cache_read_tokens) == (30, 5, 12)
    assert m.cache_write_tokens is None and "0" in m.unreported["cache_write_tokens"]
    m = RunMetrics()  # one request zero-filled: the run's totals would understate
    settle(m, [_usage(10, 2), _usage(0, 0, 0, 0)], "provider sent none")
    assert m.input_tokens is None and m.output_tokens is None
    assert m.unreported["input_tokens"] == "provider sent none"
    m = RunMetrics()  # no request at all is not zero usage either
    settle(m, [], "nothing")
    assert m.input_tokens is None and m.unreported["output_tokens"] == "nothing"
    m = RunMetrics()  # a count absent in one request: that field alone is unknown
    settle(m, [_usage(10, 2, 3), _usage(5, 1)], "x")
    assert m.input_tokens == 15 and m.cache_read_tokens is None
    assert as_reported(_usage(0, 0)) is None
    assert as_reported(_usage(4, 0, 0), ("cache_read_tokens",)) == _usage(4, 0, None, None)


def test_skill_activation_needs_a_call_that_did_not_fail():
    def doc(error: bool, name: str = "tidy-code"):
        step = Step("agent")
        step.call("c1", "skill", {"name": name})
        step.result("c1", "loaded" if not error else "failed", error)
        return build("a", "1", None, [Step("user", message="t"), step], usage_scope="request")
    assert skill_loaded(doc(False), "skills/tidy-code") is True
    assert skill_loaded(doc(True), "skills/tidy-code") is False
    assert skill_loaded(doc(False, "other"), "skills/tidy-code") is False
    assert skill_loaded(doc(False), None) is True  # a false positive, counted as one
    assert skill_loaded(build("a", "1", None, [], usage_scope="request"), "s") is None


def test_gateway_counts_stand_beside_the_agents_and_disagreement_is_flagged():
    """evalq.workers.wire: the wire's counts go beside the agent's, never in place of them."""
    from types import SimpleNamespace

    from evalq.workers.wire import record_wire

    class Run:  # a gateway run's two accessors, with fixed totals
        def __init__(self, **counts):
            self.counts = counts

        def totals(self):
            return {"model_calls": 2, "cost_usd": 0.01, "provider_429": 1, "provider_5xx": 0,
                    "retries": 0, "refused": 0, **self.counts}

        def records(self):
            return [{"index": 1}, {"index": 2}]

    wire = {"input_tokens": 100, "output_tokens": 9, "cache_read_tokens": 40,
            "cache_write_tokens": None}
    result = SimpleNamespace(metrics=RunMetrics(input_tokens=100, output_tokens=7), extra={})
    record_wire(result, Run(**wire))
    m = result.metrics
    assert (m.input_tokens, m.output_tokens, m.cache_read_tokens) == (100, 7, None)
    assert (m.wire_input_tokens, m.wire_output_tokens, m.wire_cache_read_tokens,
            m.wire_cache_write_tokens) == (100, 9, 40, None)
    assert m.accounting_disagrees == ["output_tokens"] and m.wire_provider_errors == 1
    assert result.extra["wire_records"] == [{"index": 1}, {"index": 2}]
    agree = SimpleNamespace(metrics=RunMetrics(input_tokens=100, output_tokens=9), extra={})
    record_wire(agree, Run(**wire))
    assert agree.metrics.accounting_disagrees == []
    nothing = SimpleNamespace(metrics=RunMetrics(), extra={})
    record_wire(nothing, Run(**wire))
    assert nothing.metrics.accounting_disagrees is None  # nothing the agent reported to compare
