"""What the model gateway metered on the wire, kept beside what the agent reported.

The two are independent sources: an agent's own usage report can be missing, zero-filled or
wrong, the wire cannot be edited by the agent. Where both have a count and they differ, the
run is flagged (`accounting_disagrees` names the counts); a count either side lacks is not
compared, and stays None.
"""

from __future__ import annotations

from typing import Any

from evalq.plaintext import one_line

#: the agent's count -> the same count as the gateway metered it
COMPARED = {"input_tokens": "wire_input_tokens", "output_tokens": "wire_output_tokens",
            "cache_read_tokens": "wire_cache_read_tokens",
            "cache_write_tokens": "wire_cache_write_tokens"}


def record_wire(result: Any, run: Any) -> None:
    """Copy a gateway run's totals into the result's metrics, flag disagreement, keep the
    per-request records for the artifact store."""
    totals = run.totals()
    metrics = result.metrics
    metrics.wire_requests = totals["model_calls"]
    for reported, wire in COMPARED.items():
        setattr(metrics, wire, totals[reported])
    metrics.wire_cost_usd = totals["cost_usd"]
    metrics.wire_provider_errors = totals["provider_429"] + totals["provider_5xx"]
    metrics.wire_retries = totals["retries"]
    metrics.wire_refused = totals["refused"]
    why = totals.get("why_unknown") or {}  # a sum the wire lacks, and why (a call cut at
    if why:                                 # close, a reply without the count)
        metrics.unreported = {**(metrics.unreported or {}),
                              **{f"wire_{k}": reason for k, reason in why.items()}}
    records = run.records()
    metrics.wire_models = models_asked(records)
    compared = [(r, w) for r, w in COMPARED.items()
                if getattr(metrics, r) is not None and getattr(metrics, w) is not None]
    metrics.accounting_disagrees = None if not compared else sorted(
        r for r, w in compared if getattr(metrics, r) != getattr(metrics, w))
    result.extra["wire_records"] = records


#: distinct model names kept per run (the agent chooses them: a flood stays bounded)
MODELS_KEPT, MODEL_NAME_CHARS = 20, 200


def models_asked(records: list[dict[str, Any]]) -> list[str]:
    """The models the metered requests the gateway forwarded named, sorted: what the pinned
    model is checked against (evalq.analysis.pinning). An agent may name any model its
    provider serves; one the gateway refused (a condition's allowed_models) was not used."""
    names = sorted({one_line(r["model"], MODEL_NAME_CHARS) for r in records
                    if r.get("wire") and not r.get("refused")
                    and isinstance(r.get("model"), str)})
    if len(names) > MODELS_KEPT:
        names = names[:MODELS_KEPT] + [f"… and {len(names) - MODELS_KEPT} more"]
    return names
