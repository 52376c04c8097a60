"""The plan as text for the terminal: the grid, the chosen design, the forecast, the assumptions."""

from __future__ import annotations

from typing import Any

from evalq.planning.forecast import forecast_lines


def _fmt(value: Any, spec: str = ".3f") -> str:
    return "n/a" if value is None else format(value, spec)


def _money(value: Any) -> str:
    return "n/a" if value is None else f"${value:,.2f}"


def plan_text(plan: dict[str, Any]) -> str:
    comp, target, est = plan["comparison"], plan["target"], plan["estimates"]
    pilot, floors = plan["pilot"], plan["floors"]
    metrics = target["metrics"]
    shrink = est.get("shrinkage", {}).get("passed", {})
    lines = [
        f"plan for study {plan['study']['id']} from pilot {pilot['study_id']} "
        f"({pilot['tasks']} tasks, {pilot['valid_trials']} valid of {pilot['trials']} trials; "
        f"digest {pilot['digest'][:19]}…)",
        f"comparison: {comp['candidate']} vs {comp['baseline']} ({comp['source']})",
        f"pilot: TPR {_fmt(est['baseline']['tpr'])} → {_fmt(est['candidate']['tpr'])}, "
        f"per-task difference variance {_fmt(est['difference_variance'])}, "
        f"between-condition correlation {_fmt(est['correlation'])}",
        f"pilot task spread of the baseline: observed variance {_fmt(shrink.get('observed_variance'))}"
        f", run noise {_fmt(shrink.get('noise_variance'))}, true {_fmt(shrink.get('true_variance'))}",
        f"target: detect {target['effect']:+.3f} on the {target['effect_scale']} scale (mean "
        f"{target['mean_effect_simulated']:+.3f} after bounding) with power {target['power']} on "
        f"{', '.join(metrics)}, each at alpha {target['alpha']}/{target['family_size']} = "
        f"{target['alpha_per_hypothesis']:.4g} (Holm over {target['family_size']} primary "
        f"hypotheses; {target['test']})",
    ]
    lines.extend(f"not planned: {m}: {why}" for m, why in target["metrics_not_planned"].items())
    lines.append(f"floors: ≥ {floors['min_tasks']} tasks, k ≥ {floors['min_repetitions']} "
                 f"({floors['source']})")
    lines.append("")
    power_heads = "".join(f" {m + ' power':>17}" for m in metrics)
    lines.append(f"{'tasks':>6} {'reps':>5} {'trials':>7}{power_heads} {'CI ±':>7} {'cost':>10}")
    chosen, current = plan["chosen_design"], plan["current_design"]
    for row in plan["grid"]:
        key = (row["tasks"], row["repetitions"])
        marks = []
        if chosen and key == (chosen["tasks"], chosen["repetitions"]):
            marks.append(f"← recommended (lowest {plan['ranking']['by']} meeting the target)")
        if key == (current["tasks"], current["repetitions"]):
            marks.append("← the study as written")
        if not row["within_floors"]:
            marks.append("(below the floors)")
        powers = "".join(f" {row['metrics'][m]['power']:>10.3f} ±{row['metrics'][m]['power_se']:.3f}"
                         for m in metrics)
        lines.append(f"{row['tasks']:>6} {row['repetitions']:>5} {row['trials']:>7}{powers} "
                     f"{row['ci_half_width']:>7.3f} {_money(row['forecast_cost_usd']):>10}"
                     + (" " + " ".join(marks) if marks else ""))
    lines.append("")
    if chosen:
        lines.append(f"design: {chosen['tasks']} tasks × {chosen['repetitions']} repetitions "
                     f"({chosen['trials']} trials), weakest power {chosen['weakest_power']:.3f}, "
                     f"ranked by {plan['ranking']['by']}")
    else:
        lines.append(f"design: none found: {plan['chosen_reason']}")
    if plan["ranking"]["note"]:
        lines.append(f"ranking: {plan['ranking']['note']}")
    warning = plan["power_warning"]
    if warning["warn"]:
        lines.append(f"power_warning ({warning['design']} design): " + "; ".join(warning["reasons"]))
    lines.extend(f"caution: {c}" for c in plan.get("pilot_cautions", []))
    lines.extend(forecast_lines(plan["forecast"]))
    lines.append("assumptions:")
    lines.extend(f"  - {a}" for a in plan["assumptions"])
    sim = plan["simulation"]
    lines.append(f"simulation: {sim['simulations']} studies per design, seed {sim['seed']}")
    return "\n".join(lines)
