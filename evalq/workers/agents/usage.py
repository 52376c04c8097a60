"""Honest token accounting from an agent's own output.

A count is kept only when the agent's output carried it for every request. Agents fill in
zeros when the provider sent no usage (litellm, Claude Code's final `result` event, opencode,
codex), so a request whose counts are all zero counts as "not reported", and the reason is
kept beside the metrics instead of a 0 that would make the run look free.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Optional

from evalq.models import RunMetrics
from evalq.workers.agents.streams import opt_sum

FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


def zero_filled(usage: Optional[Mapping[str, Optional[int]]]) -> bool:
    """True when a request's usage is missing or every count in it is 0 or absent."""
    return usage is None or not any(usage.get(k) for k in FIELDS)


def settle(metrics: RunMetrics, usages: Iterable[Optional[Mapping[str, Optional[int]]]],
           why_missing: str, *, zero_means_missing: Iterable[str] = (),
           notes: Optional[dict[str, str]] = None) -> dict[str, str]:
    """Sum per-request `usages` into `metrics`; a field stays None unless every request
    reported it. `zero_means_missing`: fields the agent prints as 0 when the provider sent none
    (a total of 0 there is "not reported"). Returns the reasons for each None, also on metrics."""
    usages = list(usages)
    reasons = dict(notes or {})
    if not usages or any(zero_filled(u) for u in usages):
        reasons.update({k: why_missing for k in FIELDS})
        metrics.unreported = reasons
        return reasons
    for key in FIELDS:
        total = opt_sum(u.get(key) for u in usages)
        if total == 0 and key in zero_means_missing:
            total = None
            reasons.setdefault(key, "the agent prints 0 here when the provider reports none")
        elif total is None:
            reasons.setdefault(key, "not in the agent's per-request usage")
        setattr(metrics, key, total)
    metrics.unreported = reasons or None
    return reasons


def as_reported(usage: Optional[Mapping[str, Optional[int]]],
                zero_means_missing: Iterable[str] = ()) -> Optional[dict[str, Optional[int]]]:
    """One request's usage as the trajectory shows it: None when zero-filled, and None for a
    field the agent prints as 0 when the provider sent none."""
    if zero_filled(usage):
        return None
    zeros = set(zero_means_missing)
    return {k: (None if k in zeros and usage.get(k) == 0 else usage.get(k)) for k in FIELDS}
