"""One metered request as plain data, and a run's totals (None where any model call lacks it).

Totals over tokens and cost count the model calls that reached the provider and were answered
2xx: providers do not bill refused or failed requests, so those add nothing, but a billed reply
that carried no count makes the total unknown, never 0; so does a model call still in flight
when the run closed (the provider may bill it, and nobody read its usage), with the reason.

Everything a record keeps that the agent chose (the model name as sent, the path, messages
quoting them) is cut to a bound with a marker: an agent naming an 8 MiB model in every request
must not grow the worker's memory, or the run's wire artifact, by as much.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Optional

from evalq.pricing import PriceTable, cost_of
from evalq.workers.gateway.usage import KEYS, empty


#: characters kept of an agent-chosen text field (a real model id or path is far shorter)
MAX_FIELD_CHARS = 256
#: characters kept of a refusal or error message (which may quote the agent's text)
MAX_MESSAGE_CHARS = 1024


def bounded(text: Optional[str], limit: int = MAX_FIELD_CHARS) -> Optional[str]:
    """`text` cut to `limit` characters with a marker saying how much was cut."""
    if text is None or len(text) <= limit:
        return text
    return f"{text[:limit]}…[{len(text) - limit} characters cut]"


@dataclass
class Record:
    index: int
    started_at: float                     # unix time the request arrived
    method: str
    path: str                             # as the agent sent it (no query), bounded
    upstream: Optional[str] = None        # the allowlisted base URL it went to
    wire: Optional[str] = None            # anthropic-messages | openai-chat | openai-responses
    model: Optional[str] = None           # as the agent sent it, bounded
    stream: bool = False
    status: Optional[int] = None          # what the agent got back
    refused: Optional[str] = None         # why the gateway answered itself (allowlist, budget)
    error: Optional[str] = None           # upstream or client failure, if any
    latency_ms: Optional[float] = None    # its first bytes' arrival to the last byte sent
    queued_ms: Optional[float] = None     # of which waiting for a provider concurrency slot
    upstream_ms: Optional[float] = None   # of which sent upstream until its reply's last byte
    request_bytes: int = 0
    prompt_messages: Optional[int] = None
    prompt_chars: Optional[int] = None
    retry: bool = False                   # the same method, path and body was seen before
    usage: dict[str, Optional[int]] = field(default_factory=empty)
    cost_usd: Optional[float] = None
    max_output: Optional[int] = None      # the request's output cap, if it set one
    usage_requested: bool = False         # the gateway added stream_options.include_usage
    charged: Optional[str] = None         # how the budgets were charged, when not by usage
    cut_at_close: bool = False            # a model call the run's close ended in flight

    @property
    def billed(self) -> bool:
        """A model call the provider answered with success (so it used tokens)."""
        return self.wire is not None and self.refused is None and self.status is not None \
            and 200 <= self.status < 300

    def price(self, table: PriceTable) -> None:
        """Cost from the price table; None when the model has no price or a charged count is
        missing; 0 for a model call that was refused or failed (not billed)."""
        if not self.billed:
            self.cost_usd = 0.0 if self.wire else None
            return
        _, prices = table.lookup(self.model)
        self.cost_usd = cost_of(self.usage, prices) if prices else None

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(data.pop("usage"))
        return data


def capped(records: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """The records whose JSON lines fit in `limit` bytes, and a marker record for the rest."""
    kept, size = [], 0
    for index, record in enumerate(records):
        size += len(json.dumps(record, sort_keys=True)) + 1
        if size > limit:
            left = len(records) - index
            return kept + [{"cut": f"{left} more records not kept: the wire records of one "
                                   f"run are capped at {limit} bytes (the totals count "
                                   "them all)"}]
        kept.append(record)
    return kept


def totals(records: Iterable[Record]) -> dict[str, Any]:
    records = list(records)
    billed = [r for r in records if r.billed]
    out: dict[str, Any] = {
        "requests": len(records),
        "forwarded": sum(r.refused is None and r.upstream is not None for r in records),
        "refused": sum(r.refused is not None for r in records),
        "model_calls": sum(r.wire is not None and r.refused is None for r in records),
        "retries": sum(r.retry for r in records),
        "provider_429": sum(r.refused is None and r.status == 429 for r in records),
        "provider_5xx": sum(r.refused is None and (r.status or 0) >= 500 for r in records),
        "errors": sum(r.error is not None for r in records),
    }
    cut = next((r for r in records if r.cut_at_close), None)
    out["unavailable"] = None if cut is None else (
        f"model call {cut.index} was in flight when the run closed: the provider may have "
        "billed it, and its usage was never read")
    #: why a sum is None: the cut call, else the first billed reply without the count
    out["why_unknown"] = {}
    for key in KEYS:
        values = [r.usage[key] for r in billed]
        out[key] = None if None in values or cut else sum(values)
        if out[key] is None:
            out["why_unknown"][key] = out["unavailable"] or (
                f"the reply to model call {billed[values.index(None)].index} carried no {key}")
    costs = [r.cost_usd for r in billed]
    out["cost_usd"] = None if None in costs or cut else round(sum(costs), 10)
    if out["cost_usd"] is None:
        out["why_unknown"]["cost_usd"] = out["unavailable"] or (
            f"model call {billed[costs.index(None)].index} could not be priced (its model "
            "has no price, or a charged count is missing)")
    return out
