"""The report as plain data (the JSON report's shape); every format renders this one result."""

from __future__ import annotations

from collections import Counter
from typing import Any

from .. import __version__
from ..models import OUTCOMES
from ..store import attempts_of, load_study, trials_of
from .attempts import VALID, TrialView, trial_views

SCHEMA_VERSION = "1.0"


def _outcome_counts(outcomes) -> dict[str, int]:
    counts = Counter(o for o in outcomes if o is not None)
    return {name: counts.get(name, 0) for name in OUTCOMES}


def _rate(counts: dict[str, int]) -> float | None:
    valid = sum(counts[o] for o in VALID)
    return counts["correct"] / valid if valid else None


def condition_summary(views: list[TrialView]) -> dict[str, Any]:
    eventual = _outcome_counts(v.outcome for v in views)
    first = _outcome_counts(v.first.outcome if v.first else None for v in views)
    finished = sum(1 for v in views if v.outcome is not None)
    return {
        "outcomes": eventual,
        "success_rate": _rate(eventual),
        "first_attempt": {"outcomes": first, "success_rate": _rate(first)},
        "trials": {"planned": len(views), "finished": finished, "pending": len(views) - finished},
        "attempts": sum(len(v.attempts) for v in views),
    }


def compute_report(engine, study_id: str) -> dict[str, Any]:
    study = load_study(engine, study_id)
    views = trial_views(trials_of(engine, study_id), attempts_of(engine, study_id))
    condition_names = [c["name"] for c in study.manifest["conditions"]]
    conditions = {name: condition_summary([v for v in views if v.condition == name])
                  for name in condition_names}
    finished = sum(1 for v in views if v.outcome is not None)
    return {
        "schema_version": SCHEMA_VERSION,
        "evalq_version": __version__,
        "study": {"id": study.id, "mode": study.mode, "lock_digest": study.lock_digest,
                  "seed": study.manifest.get("seed"),
                  "repetitions": study.manifest.get("repetitions"),
                  "fixtures": sorted({v.fixture_id for v in views}),
                  "cancelled": study.cancelled},
        "trials": {"planned": len(views), "finished": finished, "pending": len(views) - finished},
        "counting": "first valid attempt (correct, incorrect or timed_out), else the latest "
                    "failure; first-attempt figures are reported beside it",
        "conditions": conditions,
        "trial_rows": [{"trial_id": v.trial_id, "fixture": v.fixture_id,
                        "condition": v.condition, "repetition": v.repetition,
                        "order": v.order_index, "outcome": v.outcome,
                        "first_outcome": v.first.outcome if v.first else None,
                        "attempts": len(v.attempts)} for v in views],
    }
