"""An agent's reported numbers are kept only when they are numbers: a count is a whole number
from 0 to MAX_COUNT, a cost finite and from 0 to MAX_COST_USD; anything else is None with the
reason beside it, and never an exception (which would lose every other count of the run)."""

from __future__ import annotations

import math

from evalq.models import RunMetrics
from evalq.workers.agents.numbers import (MAX_COUNT, cost_or_reason, count_or_reason,
                                          sane_metrics)


def test_counts_are_kept_only_when_they_are_counts():
    kept = [(0, 0), (7, 7), (7.0, 7), (MAX_COUNT, MAX_COUNT), (None, None)]
    for given, expected in kept:
        assert count_or_reason(given) == (expected, None), given
        assert type(count_or_reason(given)[0]) is type(expected)
    refused = [(float("nan"), "not a finite"), (float("inf"), "not a finite"),
               (-1, "negative"), (-0.5, "not a whole"), (2.5, "not a whole"),
               (MAX_COUNT + 1, "over"), (10**30, "over"), (1e308, "over"),
               (True, "not a number"), ("12", "not a number"), ([1], "not a number")]
    for given, why in refused:
        value, reason = count_or_reason(given)
        assert value is None and why in reason, (given, reason)
    assert count_or_reason(-9, signed=True) == (-9, None)  # an exit status killed by a signal


def test_costs_are_finite_and_not_negative():
    assert cost_or_reason(0) == (0.0, None) and cost_or_reason(1.25) == (1.25, None)
    for given, why in ((float("nan"), "not a finite"), (-float("inf"), "not a finite"),
                       (-0.01, "negative"), (1e7, "over"), (10**400, "over"), (False, "number")):
        value, reason = cost_or_reason(given)
        assert value is None and why in reason, (given, reason)


def test_sane_metrics_keeps_good_values_and_explains_the_rest():
    metrics = RunMetrics(input_tokens=10, tool_calls=2, exit_code=-9, duration_seconds=1.5,
                         stop_reason="exit \udcff", wire_models=["m\udc80"],
                         unreported={"turns": "not reported"})
    metrics.output_tokens = -5                 # set past validation, as an adapter may
    metrics.cost_usd = float("nan")
    metrics.request_prompt_tokens = [1, 2, -3]
    metrics.cache_read_tokens = 10**20
    out = sane_metrics(metrics)
    assert (out.input_tokens, out.tool_calls, out.exit_code, out.duration_seconds) == \
        (10, 2, -9, 1.5)
    assert out.output_tokens is None and "negative" in out.unreported["output_tokens"]
    assert out.cost_usd is None and "not a finite" in out.unreported["cost_usd"]
    assert out.request_prompt_tokens is None and "negative" in \
        out.unreported["request_prompt_tokens"]
    assert out.cache_read_tokens is None and "over" in out.unreported["cache_read_tokens"]
    assert out.unreported["turns"] == "not reported"
    assert out.stop_reason == "exit \\udcff" and out.wire_models == ["m\\udc80"]
    assert not any(isinstance(v, float) and not math.isfinite(v)
                   for v in out.model_dump().values())
