"""Markdown for the blinded-review rules: runs short of two raters, and a study split by a
change of environment (each part's comparisons on their own)."""

from __future__ import annotations

from typing import Any

from evalq.analysis.pinned import describe
from evalq.report import fmt
from evalq.report.mdtext import inert


def coverage_lines(report: dict[str, Any]) -> list[str]:
    """Where raters score the study: whether every run had two of them."""
    coverage = report.get("rater_coverage")
    if not coverage:
        return []
    if coverage["complete"]:
        return [f"Every one of the {coverage['runs']} runs was scored by at least two raters.", ""]
    named = ", ".join(inert(t, 200) for t in coverage["trials"])
    more = coverage["under_two_raters"] - len(coverage["trials"])
    return [f"**Ratings incomplete: {coverage['under_two_raters']} of {coverage['runs']} runs "
            "have fewer than two raters** (each run needs two independent raters): "
            + named + (f", and {more} more" if more > 0 else ""), ""]


def split_lines(report: dict[str, Any]) -> list[str]:
    """Each environment's part of a study whose environment changed, compared on its own."""
    split = report.get("environment_split")
    if not split:
        return []
    tests = report["inference"]["tests"]
    lines = ["## Environment split", "",
             f"The environment changed within the study: {split['environments']} environments, "
             f"differing in {', '.join(inert(f, 80) for f in split['differing_fields'])}. "
             "Results hold only for the environment they were recorded in, so each part is "
             "its own comparison below; the pooled comparisons above mix environments.", ""]
    for part in split["parts"]:
        values = "; ".join(f"{inert(k, 80)} = {inert(describe(v), 120)}"
                           for k, v in part["values"].items())
        lines += [f"### Environment {part['environment']}: {values}", "",
                  f"{part['runs']} runs of {part['tasks']} tasks (run order "
                  f"{part['first_order']}-{part['last_order']}); conditions "
                  f"{', '.join(inert(c, 80) for c in part['conditions'])}", ""]
        if not part["comparisons"]:
            lines += ["No comparison: this part holds fewer than two conditions.", ""]
            continue
        head = "| comparison | metric | tasks | delta | 95% CI |" + (" p | p (Holm) |" if tests
                                                                    else "")
        lines += [head, "|---|---|---|---|---|" + ("---|---|" if tests else "")]
        for comp in part["comparisons"]:
            name = f"{inert(comp['candidate'], 80)} - {inert(comp['baseline'], 80)}"
            for metric, m in comp["metrics"].items():
                if not m["primary"]:
                    continue
                row = (f"| {name} | {inert(metric, 40)} | {m['n_tasks']} | "
                       f"{fmt.with_reason(fmt.signed(m['delta']), m['reason'])} | "
                       f"{fmt.interval(m['ci_low'], m['ci_high'], True)} |")
                if tests:
                    row += f" {fmt.number(m['p_value'], 4)} | {fmt.number(m['p_holm'], 4)} |"
                lines.append(row)
        lines.append("")
    return lines
