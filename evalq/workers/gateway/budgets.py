"""Live budgets of one run: tokens, requests and cost, checked before and after each model call
(requests to other paths, such as a model list, are forwarded unbudgeted).

A request admitted before a budget was spent is let finish (tokens are only known once the
reply is in), so a run can overshoot by what its requests in flight use. A token budget that
cannot be measured (a billed reply without usage, or without its input or output count) is
spent: the study asked for a token bound, and the gateway fails closed rather than let an
unmetered run go on. A cost that cannot be
priced (a model without a price, a count missing) leaves the cost budget unenforced instead,
recorded as `unenforced`: every fixture carries a cost limit, and stopping each run of a model
the price table lacks would turn "unknown cost" into a made-up outcome; the run's cost stays
null and its accounting incomplete.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from evalq.workers.gateway.records import Record
from evalq.workers.gateway.usage import KEYS


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


class BudgetMeter:
    """Counts what a run has spent; `admit` and `charge` say which budget is spent, if any."""

    def __init__(self, budgets: RunBudgets):
        self.budgets = budgets
        self.admitted = 0
        self.finished = 0
        self.tokens = 0
        self.cost = 0.0
        self.spent: Optional[str] = None
        #: why a budget could not be enforced (the first reason), or None
        self.unenforced: Optional[str] = None

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
            counts = [record.usage[k] for k in KEYS]
            self.tokens += sum(c for c in counts if c is not None)
            if b.max_tokens is not None and all(c is None for c in counts):
                return self._spend(f"tokens budget cannot be enforced: request "
                                   f"{record.index} reported no usage")
            # a reply cut before its last count (a stream ended early) is not a free one
            missing = [k for k in ("input_tokens", "output_tokens") if record.usage[k] is None]
            if b.max_tokens is not None and missing:
                return self._spend(f"tokens budget cannot be enforced: request "
                                   f"{record.index} reported no {' or '.join(missing)}")
            if record.cost_usd is None and b.max_cost_usd is not None:
                self.unenforced = self.unenforced or (
                    f"cost budget not enforced from request {record.index}: no price "
                    f"(model {record.model!r}, or a count missing)")
            self.cost += record.cost_usd or 0.0
        if b.max_tokens is not None and self.tokens >= b.max_tokens:
            return self._spend(f"tokens budget spent ({self.tokens} of {b.max_tokens})")
        if b.max_cost_usd is not None and self.cost >= b.max_cost_usd:
            return self._spend(f"cost budget spent (${self.cost:.6f} of ${b.max_cost_usd:g})")
        if b.max_requests is not None and self.finished >= b.max_requests \
                and self.admitted >= b.max_requests:
            return self._spend(f"requests budget spent ({self.admitted} of {b.max_requests})")
        return None

    def _spend(self, reason: str) -> str:
        self.spent = self.spent or reason
        return self.spent

    @staticmethod
    def budget_name(reason: str) -> str:
        return reason.split(" ", 1)[0]
