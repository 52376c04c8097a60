"""Cost from a versioned price table; the table's id and date go on every run.

Tokens follow evalq's convention: input_tokens excludes cache reads and writes, which are
priced on their own. A count the agent did not report (None) is only harmless when its price
is 0; otherwise the price-table cost is unavailable. When the agent reports its own cost both
are kept, and `cost_source` says which one `cost_usd` is.

A model is priced only by its exact id or an alias the table lists beside it: never by a
prefix, so a model the table lacks (a `-pro` beside its base model) stays unpriced rather than
priced as a cheaper one. A provider qualifier (`openai/gpt-5`, as opencode and litellm write
ids) is not part of the id.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
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
    #: other ids of a priced model (dated snapshots) -> the table's name for it
    aliases: dict[str, str] = field(default_factory=dict)
    #: the most output tokens a model writes in one reply (what an unmetered reply may cost)
    max_output: dict[str, int] = field(default_factory=dict)

    def name_of(self, model: Optional[str]) -> Optional[str]:
        """The table's name for a model id ('anthropic/claude-sonnet-4-5-20250929' ->
        'claude-sonnet-4-5'), None when it is neither listed nor an alias."""
        if not model:
            return None
        name = model.rsplit("/", 1)[-1]
        return name if name in self.models else self.aliases.get(name)

    def lookup(self, model: Optional[str]) -> tuple[Optional[str], Optional[dict[str, float]]]:
        """The table's name and prices for a model id, or (None, None)."""
        name = self.name_of(model)
        return (name, self.models[name]) if name else (None, None)


@lru_cache(maxsize=8)
def load_price_table(path: Path = DEFAULT_TABLE) -> PriceTable:
    data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    models = data["models"]
    aliases = {alias: name for name, v in models.items() for alias in v.get("aliases", [])}
    clashes = sorted(a for a in aliases if a in models)
    if clashes:
        raise ValueError(f"{path}: {', '.join(clashes)} is both a model and an alias; "
                         "list it once")
    return PriceTable(id=data["id"], date=str(data["date"]),
                      models={k: {kind: float(v[kind]) for kind in KINDS}
                              for k, v in models.items()},
                      aliases=aliases,
                      max_output={k: int(v["max_output"]) for k, v in models.items()
                                  if "max_output" in v})


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
