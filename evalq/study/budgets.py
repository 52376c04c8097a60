"""A trial's budgets: the tighter of fixture and study limits, and the queue's time limits."""

from __future__ import annotations

from typing import TYPE_CHECKING

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
