"""Inter-rater reliability per binary outcome and per condition, and which runs lack two raters.

Two raters who scored every run: Cohen's kappa. Anything else (rotating raters from a pool, any
number of ratings per run): Fleiss' kappa in its generalisation to unequal numbers of ratings.
Krippendorff's alpha (nominal), which takes missing ratings in its stride, is reported beside
either as the missing-data check; so are raw agreement and the positive rate, since kappa is
unstable for rare classes.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Optional

from evalq import stats
from evalq.analysis.runs import RATER_FIELDS, Run


def _items(runs: list[Run], outcome: str) -> list[dict[str, Optional[bool]]]:
    """Per run: {rater_id: label} for this outcome (runs nobody rated are left out)."""
    items = []
    for run in runs:
        labels = {str(r["rater_id"]): r.get(outcome) for r in run.ratings
                  if r.get(outcome) is not None}
        if labels:
            items.append(labels)
    return items


def agreement(items: list[dict[str, Optional[bool]]]) -> dict[str, Any]:
    """{agreement, kappa, kind, alpha, positive_rate, n_items, ratings_per_item, raters} for one
    outcome over some runs (kind: cohen or fleiss; alpha: Krippendorff, nominal)."""
    if not items:
        return {"agreement": None, "kappa": None, "kind": None, "alpha": None,
                "positive_rate": None, "n_items": 0, "ratings_per_item": {}, "raters": []}
    raters = sorted({r for item in items for r in item})
    rows = [list(item.values()) for item in items]
    all_labels = [v for row in rows for v in row]
    fixed_two = len(raters) == 2 and all(len(item) == 2 for item in items)
    counts, _ = stats.category_counts(rows, categories=[False, True])
    if fixed_two:
        a, b = raters
        kappa = stats.cohen_kappa([i[a] for i in items], [i[b] for i in items])
        kind = "cohen"
    else:
        kappa = stats.fleiss_kappa(counts)
        kind = "fleiss"
    per_item = Counter(len(item) for item in items)
    return {"agreement": stats.raw_agreement(rows), "kappa": kappa, "kind": kind,
            "alpha": stats.krippendorff_alpha_nominal(counts),
            "positive_rate": stats.positive_rate(all_labels), "n_items": len(items),
            "ratings_per_item": {str(n): per_item[n] for n in sorted(per_item)},
            "raters": raters}


#: runs named in the incomplete-ratings block; the rest are counted
NAMED_RUNS = 20


def rater_coverage(runs: list[Run]) -> Optional[dict[str, Any]]:
    """Runs scored by fewer than two independent raters, which the protocol needs for every
    run: None for a study no rater was asked to score (native runs without ratings)."""
    if not any(run.imported or run.ratings for run in runs):
        return None
    short = [run for run in runs if len({str(r.get("rater_id")) for r in run.ratings}) < 2]
    return {"runs": len(runs), "under_two_raters": len(short),
            "trials": [run.view.trial_id for run in short[:NAMED_RUNS]],
            "complete": not short}


def coverage_reason(coverage: Optional[dict[str, Any]]) -> list[str]:
    """The claims reason incomplete ratings give, if any."""
    if not coverage or coverage["complete"]:
        return []
    return [f"ratings incomplete: {coverage['under_two_raters']} of {coverage['runs']} runs "
            "have fewer than two raters (each run needs two independent raters)"]


def reliability(runs: list[Run], conditions: list[str],
                primary_outcomes: tuple[str, ...]) -> dict[str, Any]:
    """The report's reliability block; outcomes maps each rater field to its agreement figures."""
    outcomes: dict[str, Any] = {}
    rated = any(run.ratings for run in runs)
    if not rated:
        return {"outcomes": {}, "low_reliability": None, "reasons": [],
                "coverage": rater_coverage(runs),
                "note": "no rater scores in this study (import raters.jsonl to report agreement)"}
    for outcome in RATER_FIELDS:
        block = agreement(_items(runs, outcome))
        block["by_condition"] = {c: agreement(_items([r for r in runs if r.condition == c],
                                                     outcome)) for c in conditions}
        block["primary"] = outcome in primary_outcomes
        outcomes[outcome] = block
    kappas = {o: outcomes[o]["kappa"] for o in primary_outcomes if outcomes[o]["n_items"]}
    flag, reasons = stats.low_reliability(kappas)
    return {"outcomes": outcomes, "low_reliability": flag, "reasons": reasons,
            "coverage": rater_coverage(runs), "note": None}
