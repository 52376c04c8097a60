"""Cost from a versioned price table; the table's id and date go on every run (SPEC R5).

Tokens follow evalq's convention: input_tokens excludes cache reads and writes, which are
priced on their own. A count the agent did not report (None) is only harmless when its price
is 0; otherwise the price-table cost is unavailable. When the agent reports its own cost both
are kept, and `cost_source` says which one `cost_usd` is.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Mapping, Optional

from evalq.models import RunMetrics

DEFAULT_TABLE = Path(__file__).parent / "data" / "prices-2025-11.toml"
KINDS = ("input", "output", "cache_read", "cache_write")
TOKEN_FIELD = {"input": "input_tokens", "output": "output_tokens",
               "cache_read": "cache_read_tokens", "cache_write": "cache_write_tokens"}


@dataclass(frozen=True)
class PriceTable:
    id: str
    date: str
    models: dict[str, dict[str, float]]

    def lookup(self, model: Optional[str]) -> tuple[Optional[str], Optional[dict[str, float]]]:
        """The table's name and prices for a model id like 'anthropic/claude-sonnet-4-5-20250929'."""
        if not model:
            return None, None
        name = model.split("/")[-1].lower()
        name = re.sub(r"-(\d{8}|latest)$", "", name)
        if name in self.models:
            return name, self.models[name]
        prefixes = [m for m in self.models if name.startswith(m + "-")]
        if prefixes:
            best = max(prefixes, key=len)
            return best, self.models[best]
        return None, None


@lru_cache(maxsize=8)
def load_price_table(path: Path = DEFAULT_TABLE) -> PriceTable:
    data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    return PriceTable(id=data["id"], date=str(data["date"]),
                      models={k: {kind: float(v[kind]) for kind in KINDS}
                              for k, v in data["models"].items()})


def cost_of(usage: Mapping[str, Optional[int]], prices: Mapping[str, float]) -> Optional[float]:
    """Dollars for one model's usage, or None when a charged count is unknown."""
    total = 0.0
    for kind in KINDS:
        count = usage.get(TOKEN_FIELD[kind])
        if count is None:
            if prices[kind] != 0.0:
                return None
            continue
        total += count * prices[kind] / 1_000_000
    return round(total, 10)


def describe_cache_pricing(priced: Mapping[str, Mapping[str, float]]) -> str:
    parts = []
    for name, prices in sorted(priced.items()):
        write = ("not charged" if prices["cache_write"] == 0.0
                 else f"${prices['cache_write']:g}/Mtok (5-minute cache rate)")
        parts.append(f"{name}: cache reads ${prices['cache_read']:g}/Mtok, cache writes {write}")
    return "; ".join(parts)


def price_run(metrics: RunMetrics, model: Optional[str],
              by_model: Optional[Mapping[str, Mapping[str, Optional[int]]]] = None,
              table: Optional[PriceTable] = None) -> RunMetrics:
    """Fill cost_usd, cost_source, price_table_id/date and cache_pricing on `metrics` (in place).

    `by_model` splits the usage per model when the agent used several (e.g. a small model for
    side requests); otherwise the whole usage is priced at `model`.
    """
    table = table or load_price_table()
    metrics.price_table_id, metrics.price_table_date = table.id, table.date
    usage = by_model or {model or "": {f: getattr(metrics, f) for f in TOKEN_FIELD.values()}}
    priced: dict[str, dict[str, float]] = {}
    total: Optional[float] = 0.0
    for name, counts in usage.items():
        key, prices = table.lookup(name)
        part = cost_of(counts, prices) if prices else None
        if part is None or total is None:
            total = None
        else:
            total += part
        if prices:
            priced[key] = prices
    metrics.cache_pricing = describe_cache_pricing(priced) if priced else None
    if total is not None and metrics.input_tokens is not None and \
            metrics.output_tokens is not None:
        metrics.cost_usd, metrics.cost_source = round(total, 10), "price_table"
    elif metrics.reported_cost_usd is not None and None not in (metrics.input_tokens,
                                                                metrics.output_tokens):
        # an agent's own figure stands in only beside reported tokens (else it priced zeros)
        metrics.cost_usd, metrics.cost_source = metrics.reported_cost_usd, "agent_reported"
    else:
        metrics.cost_usd, metrics.cost_source = None, None
    return metrics
