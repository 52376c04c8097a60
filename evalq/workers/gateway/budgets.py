"""Live budgets of one run: tokens, requests and cost, checked before and after each model call
(token counts, which are free, are forwarded unbudgeted).

A request admitted before a budget was spent is let finish (tokens are only known once the
reply is in), so a run can overshoot by what its requests in flight use. Budgets fail closed:
a billed reply whose usage is unknown (no usage, or its input or output count missing: a
stream cut short, a provider that sent none) is charged at its worst case, its input at most
one token per request byte and its output at the request's own cap, else the model's limit
from the price table, at the model's dearest input and its output price. When not even that
is known (no cap, no limit; a cost budget and no price) the budget cannot be enforced and is
spent. A cost budget also refuses, before it is sent, any model call naming a model the price
table lacks (proxy.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from evalq.pricing import PriceTable, cost_of
from evalq.workers.gateway.records import Record
from evalq.workers.gateway.usage import KEYS

INPUT_KINDS = ("input", "cache_read", "cache_write")


@dataclass(frozen=True)
class RunBudgets:
    """Upper bounds for one run; None = no bound. Tokens = input + output + cache read + write."""

    max_tokens: Optional[int] = None
    max_requests: Optional[int] = None
    max_cost_usd: Optional[float] = None

    def __post_init__(self) -> None:
        for name in ("max_tokens", "max_requests", "max_cost_usd"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"budget {name}={value!r} must be above 0 (or None: no bound)")


def worst_case(record: Record, table: PriceTable) -> tuple[Optional[int], Optional[float]]:
    """(tokens, dollars) a billed reply with unknown usage may have cost at most; None for
    what cannot be bounded (no output cap nor model limit; no price). The input side is its
    counts when all are known, else one token per request byte at the dearest input price."""
    usage = record.usage
    name, prices = table.lookup(record.model)
    output = usage["output_tokens"]
    if output is None:
        output = record.max_output or (table.max_output.get(name) if name else None)
    sides = [usage[k] for k in ("input_tokens", "cache_read_tokens", "cache_write_tokens")]
    known = None not in sides
    inputs = sum(sides) if known else record.request_bytes
    tokens = None if output is None else inputs + output
    if prices is None or output is None:
        return tokens, None
    if known:
        dollars = cost_of({**usage, "output_tokens": output}, prices)
    else:
        dollars = (inputs * max(prices[k] for k in INPUT_KINDS) + output * prices["output"]) \
            / 1_000_000
    return tokens, dollars


class BudgetMeter:
    """Counts what a run has spent; `admit` and `charge` say which budget is spent, if any."""

    def __init__(self, budgets: RunBudgets, table: Optional[PriceTable] = None):
        self.budgets = budgets
        self.table = table
        self.admitted = 0
        self.finished = 0
        self.tokens = 0
        self.cost = 0.0
        self.spent: Optional[str] = None

    def admit(self) -> Optional[str]:
        """Refusal reason for a new model request, or None (and the request is counted)."""
        if self.spent:
            return self.spent
        limit = self.budgets.max_requests
        if limit is not None and self.admitted >= limit:
            return f"requests budget spent ({self.admitted} of {limit})"
        self.admitted += 1
        return None

    def charge(self, record: Record) -> Optional[str]:
        """Add a finished request; the reason a budget is now spent, or None."""
        self.finished += 1
        b = self.budgets
        if record.billed:
            reason = self._charge_billed(record)
            if reason is not None:
                return self._spend(reason)
        if b.max_tokens is not None and self.tokens >= b.max_tokens:
            return self._spend(f"tokens budget spent ({self.tokens} of {b.max_tokens})")
        if b.max_cost_usd is not None and self.cost >= b.max_cost_usd:
            return self._spend(f"cost budget spent (${self.cost:.6f} of ${b.max_cost_usd:g})")
        if b.max_requests is not None and self.finished >= b.max_requests \
                and self.admitted >= b.max_requests:
            return self._spend(f"requests budget spent ({self.admitted} of {b.max_requests})")
        return None

    def _charge_billed(self, record: Record) -> Optional[str]:
        """Add a billed reply's tokens and cost (at its worst case when its usage is unknown);
        the reason a budget cannot be enforced, or None."""
        b = self.budgets
        usage = record.usage
        missing = [k for k in ("input_tokens", "output_tokens") if usage[k] is None]
        if not missing:
            self.tokens += sum(usage[k] or 0 for k in KEYS)
            if record.cost_usd is not None or b.max_cost_usd is None:
                self.cost += record.cost_usd or 0.0
                return None
        if self.table is None:
            tokens, dollars = None, None
        else:
            tokens, dollars = worst_case(record, self.table)
        why = f"request {record.index} reported no {' or '.join(missing) or 'cache count'}"
        if missing:
            if tokens is None and b.max_tokens is not None:
                return f"tokens budget cannot be enforced: {why}, and its output has no cap"
            self.tokens += tokens or 0
        if dollars is None and b.max_cost_usd is not None:
            return f"cost budget cannot be enforced: {why}, and it has no worst case " \
                "(no price, or no output cap)"
        self.cost += dollars or 0.0
        charged = [f"{tokens} tokens"] if missing else []
        charged += [f"${dollars:.6f}"] if dollars is not None else []
        record.charged = f"at its worst case ({why}): {', '.join(charged) or 'nothing known'}"
        return None

    def _spend(self, reason: str) -> str:
        self.spent = self.spent or reason
        return self.spent

    @staticmethod
    def budget_name(reason: str) -> str:
        return reason.split(" ", 1)[0]
