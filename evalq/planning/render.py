"""The plan as text for the terminal: the grid, the chosen design, the forecast, the assumptions."""

from __future__ import annotations

from typing import Any

from evalq.planning.forecast import forecast_lines


def _fmt(value: Any, spec: str = ".3f") -> str:
    return "n/a" if value is None else format(value, spec)


def plan_text(plan: dict[str, Any]) -> str:
    comp, target, est = plan["comparison"], plan["target"], plan["estimates"]
    pilot = plan["pilot"]
    lines = [
        f"plan for study {plan['study']['id']} from pilot {pilot['study_id']} "
        f"({pilot['tasks']} tasks, {pilot['valid_trials']} valid of {pilot['trials']} trials; "
        f"digest {pilot['digest'][:19]}…)",
        f"comparison: {comp['candidate']} vs {comp['baseline']} on {comp['metric']} ({comp['source']})",
        f"pilot: TPR {_fmt(est['baseline']['tpr'])} → {_fmt(est['candidate']['tpr'])}, "
        f"per-task difference variance {_fmt(est['difference_variance'])}, "
        f"between-condition correlation {_fmt(est['correlation'])}",
        f"target: detect {target['effect']:+.3f} with power {target['power']} at alpha "
        f"{target['alpha']} ({target['test']})",
        "",
        f"{'tasks':>6} {'reps':>5} {'trials':>7} {'power':>13} {'CI ±':>7}",
    ]
    chosen = plan["chosen_design"]
    current = plan["current_design"]
    for row in plan["grid"]:
        key = (row["tasks"], row["repetitions"])
        marks = []
        if chosen and key == (chosen["tasks"], chosen["repetitions"]):
            marks.append("← smallest meeting the target")
        if key == (current["tasks"], current["repetitions"]):
            marks.append("← the study as written")
        lines.append(f"{row['tasks']:>6} {row['repetitions']:>5} {row['trials']:>7} "
                     f"{row['power']:>6.3f} ±{row['power_se']:.3f} {row['ci_half_width']:>7.3f}"
                     + (" " + " ".join(marks) if marks else ""))
    lines.append("")
    if chosen:
        lines.append(f"design: {chosen['tasks']} tasks × {chosen['repetitions']} repetitions "
                     f"({chosen['trials']} trials), power {chosen['power']:.3f}")
    else:
        lines.append(f"design: none found: {plan['chosen_reason']}")
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
