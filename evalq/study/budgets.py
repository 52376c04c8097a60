"""A trial's budgets: the tighter of fixture and study limits, and the queue's time limits;
and the check that a cost limit can be held (every model it applies to has a price)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Sequence

from evalq.errors import UserError
from evalq.models import Limits, StudyManifest

if TYPE_CHECKING:
    from evalq.study.manifest import Study


def effective_limits(fixture_limits: Limits, manifest: StudyManifest) -> Limits:
    """The tighter of the fixture's own limits and the study's budgets."""
    budget = manifest.budgets

    def tighter(a, b):
        return b if a is None else a if b is None else min(a, b)

    return Limits(wall_seconds=tighter(fixture_limits.wall_seconds, budget.wall_seconds),
                  max_steps=tighter(fixture_limits.max_steps, budget.max_steps),
                  max_cost_usd=tighter(fixture_limits.max_cost_usd, budget.max_cost_usd))


def task_limits(study: Study, fixture_id: str) -> tuple[float, float]:
    """Celery soft and hard time limits from the trial's wall budget."""
    limits = effective_limits(study.fixture(fixture_id).spec.limits, study.manifest)
    return time_limits_for(limits.wall_seconds)


def time_limits_for(wall_seconds: float) -> tuple[float, float]:
    """Soft limit: the task stops its agent and containers; hard limit: the pool kills it."""
    return wall_seconds + 120, wall_seconds + 240


def longest_trial_seconds(study: Study) -> float:
    """The longest hard time limit of any trial in the study (its wall budget plus grace)."""
    return max(task_limits(study, f.id)[1] for f in study.fixtures)


def check_priced_models(manifest: StudyManifest, fixtures: Sequence, path: Path) -> None:
    """Refuse a cost limit over a model the price table lacks. The model gateway holds a cost
    limit by pricing every call; a model without a price would be refused at every call, so
    the study is refused now, naming the condition, the model and the fix."""
    from evalq.analysis.pinning import allowed_models
    from evalq.pricing import load_price_table
    from evalq.workers.agents.registry import ADAPTERS

    costly = [f.id for f in fixtures
              if effective_limits(f.spec.limits, manifest).max_cost_usd is not None]
    if not costly:
        return
    table = load_price_table()
    for index, condition in enumerate(manifest.conditions):
        adapter = ADAPTERS.get(condition.agent)
        model = condition.model or condition.settings.get("model")
        if adapter is None or not model:
            continue
        if adapter().upstream_url(SimpleNamespace(settings=condition.settings,
                                                  model=model)) is None:
            continue  # no door: no gateway holds its cost limit
        named = sorted(allowed_models(condition.model_dump()) or [])
        unpriced = [m for m in named if "/" not in m and table.name_of(m) is None]
        if unpriced:
            where = "model" if model in unpriced or model.rsplit("/", 1)[-1] in unpriced \
                else "settings.allowed_models"
            raise UserError(
                f"condition '{condition.name}' has a cost limit (fixture {costly[0]}"
                f"{' or [budgets]' if manifest.budgets.max_cost_usd else ''}) but the price "
                f"table {table.id} has no price for {', '.join(unpriced)}, so the model "
                "gateway would refuse its calls", file=path,
                field=f"conditions.{index}.{where}",
                fix="use a model id the price table lists (or one of its aliases, see "
                    "evalq/data/prices-*.toml), or add the model to the price table")
