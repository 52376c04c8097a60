"""Cost from the versioned price table, checked against hand arithmetic; missing is None."""

from __future__ import annotations

from evalq.models import RunMetrics
from evalq.pricing import load_price_table, price_run


def test_cost_is_priced_per_kind_with_table_id_and_date():
    table = load_price_table()
    m = RunMetrics(input_tokens=1_000_000, output_tokens=200_000, cache_read_tokens=500_000,
                   cache_write_tokens=100_000, reported_cost_usd=9.99)
    price_run(m, "anthropic/claude-sonnet-4-5-20250929")
    # $3 + 0.2*$15 + 0.5*$0.30 + 0.1*$3.75 = 3 + 3 + 0.15 + 0.375
    assert abs(m.cost_usd - 6.525) < 1e-12
    assert m.cost_source == "price_table" and m.reported_cost_usd == 9.99
    assert (m.price_table_id, m.price_table_date) == (table.id, table.date)
    assert "cache writes $3.75/Mtok" in m.cache_pricing


def test_unknown_counts_and_models_never_become_zero():
    m = RunMetrics(input_tokens=1000, output_tokens=10, cache_read_tokens=None)
    price_run(m, "claude-sonnet-4-5")  # cache reads are charged but were not reported
    assert m.cost_usd is None and m.cost_source is None
    m = RunMetrics(input_tokens=1000, output_tokens=10, cache_read_tokens=0,
                   cache_write_tokens=None)
    price_run(m, "gpt-5")  # OpenAI does not charge cache writes: an unknown count is harmless
    assert abs(m.cost_usd - (1000 * 1.25 + 10 * 10.0) / 1e6) < 1e-12
    m = RunMetrics(input_tokens=5, output_tokens=5, reported_cost_usd=0.5)
    price_run(m, "some-unpriced-model")
    assert (m.cost_usd, m.cost_source) == (0.5, "agent_reported")
    m = RunMetrics()
    price_run(m, None)
    assert m.cost_usd is None and not m.accounting_complete and m.price_table_id


def test_usage_split_by_model_is_priced_model_by_model():
    m = RunMetrics(input_tokens=2000, output_tokens=200, cache_read_tokens=0,
                   cache_write_tokens=0)
    split = {"claude-sonnet-4-5": {"input_tokens": 1000, "output_tokens": 100,
                                   "cache_read_tokens": 0, "cache_write_tokens": 0},
             "claude-haiku-4-5-20251001": {"input_tokens": 1000, "output_tokens": 100,
                                           "cache_read_tokens": 0, "cache_write_tokens": 0}}
    price_run(m, "claude-sonnet-4-5", split)
    assert abs(m.cost_usd - (1000 * 3 + 100 * 15 + 1000 * 1 + 100 * 5) / 1e6) < 1e-12
