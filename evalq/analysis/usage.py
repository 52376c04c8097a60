"""Which tokens and cost an analysis counts: the model gateway's where it metered the run.

An agent's report of its own usage is its word, and a hostile agent under-reports to look
cheap. A sealed agent's only way out is the gateway, which counts the same traffic where the
agent cannot touch it (evalq/workers/wire.py). So for an attempt the gateway metered, the
counted tokens and cost are the wire's, and one the wire lacks is unavailable, never the
agent's figure instead; the agent's own figures stay beside them under `agent_*`. Attempts the
gateway did not meter (unsealed, imported, or older than the gateway) count the agent's report.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from evalq.workers.wire import COMPARED

#: a counted field -> the gateway's count of it: the compared token counts, and the cost
FROM_WIRE = {**COMPARED, "cost_usd": "wire_cost_usd"}
GATEWAY, AGENT = "gateway", "agent"


def metered(metrics: Optional[Mapping[str, Any]]) -> bool:
    """Whether the gateway metered the attempt (it counted requests, zero included)."""
    return bool(metrics) and metrics.get("wire_requests") is not None


def counted_usage(metrics: Optional[Mapping[str, Any]]) -> Mapping[str, Any]:
    """The attempt's metrics with the counted usage in the usual fields: the same mapping
    when the agent's report is what counts (no copy: a report reads 100,000), else a copy
    with the wire's counts in, the agent's under `agent_<field>`, `cost_source` "gateway"."""
    if not metered(metrics):
        return metrics or {}
    out = dict(metrics)
    for field, wire in FROM_WIRE.items():
        out["agent_" + field] = metrics.get(field)
        out[field] = metrics.get(wire)
    out["cost_source"] = GATEWAY if out["cost_usd"] is not None else None
    return out


def usage_source(metrics: Optional[Mapping[str, Any]]) -> Optional[str]:
    """"gateway", "agent", or None for an attempt with no metrics at all."""
    if not metrics:
        return None
    return GATEWAY if metered(metrics) else AGENT
