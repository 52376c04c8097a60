"""Markdown rendering of a computed report. Missing numbers read 'unavailable', never 0."""

from __future__ import annotations

from typing import Any

from ..models import OUTCOMES


def fmt_rate(value: float | None) -> str:
    return "unavailable" if value is None else f"{value:.1%}"


def render_markdown(report: dict[str, Any]) -> str:
    study, trials = report["study"], report["trials"]
    lines = [f"# evalq report: {study['id']}", "",
             f"- mode: {study['mode']}; seed {study['seed']}; {study['repetitions']} "
             f"repetitions; lock `{study['lock_digest'][:23]}…`",
             f"- trials: {trials['planned']} planned, {trials['finished']} finished, "
             f"{trials['pending']} pending", f"- counting: {report['counting']}", "",
             "## Outcomes per condition", "",
             "| condition | " + " | ".join(OUTCOMES) + " | success rate | first-attempt rate |",
             "|---|" + "---|" * (len(OUTCOMES) + 2)]
    for name, summary in report["conditions"].items():
        counts = " | ".join(str(summary["outcomes"][o]) for o in OUTCOMES)
        lines.append(f"| {name} | {counts} | {fmt_rate(summary['success_rate'])} | "
                     f"{fmt_rate(summary['first_attempt']['success_rate'])} |")
    lines += ["", "Grading and infrastructure failures are counted apart and never as "
              "incorrect; success rate = correct / (correct + incorrect + timed_out).", ""]
    return "\n".join(lines)
