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
    from evalq.workers.agents.usage import beside_gateway

    m = RunMetrics(input_tokens=100, output_tokens=7, cache_read_tokens=None)
    wire = {"input_tokens": 100, "output_tokens": 9, "cache_read_tokens": 40,
            "cache_write_tokens": None}
    assert beside_gateway(m, wire) == ["output_tokens"]
    assert m.output_tokens == 7 and m.cache_read_tokens is None  # never overwritten
    assert m.gateway_usage == wire and m.usage_disagreement == ["output_tokens"]
    assert beside_gateway(m, {**wire, "output_tokens": 7}) == []
