"""The report's "Stages: upgrade and retention" section (Markdown; the HTML page renders it)."""

from __future__ import annotations

from typing import Any

from evalq.report import fmt
from evalq.report.mdtext import inert


def _digest(value: str | None) -> str:
    return fmt.UNAVAILABLE if not value else f"`{value[:19]}…`"


def stage_lines(report: dict[str, Any]) -> list[str]:
    block = report.get("stages")
    if not block:
        return []
    change = block.get("change")
    lines = ["## Stages: upgrade and retention", "",
             f"Every task starts from a final workspace of baseline study "
             f"{inert(block['baseline_study'], 200, False)} (lock "
             f"{_digest(block['baseline_lock'])}), taking its "
             f"{'correct runs' if block['take'] == 'correct' else 'runs with a valid outcome'}; "
             f"versions {inert(block['baseline_version'], 80, False)} → "
             f"{inert(block['target_version'], 80, False)}; change "
             + (f"{inert(change['path'], 200, False)} ({_digest(change['digest'])}), run in "
                "the agent sandbox" if change else "none")
             + ("; then the agent works." if block["agent"] else
                "; no agent (a retention check)."), "",
             block["definition"], ""]
    for track, rows in block["retention"].items():
        lines += [f"### Track {inert(track, 80)}", "",
                  "| condition | baseline condition | retention [95% CI] | tasks | retained | "
                  "lost | unavailable | failing baselines now passing |",
                  "|---|---|---|---|---|---|---|---|"]
        for row in rows:
            runs, other = row["runs"], row["from_failing_baselines"]
            lines.append(f"| {inert(row['condition'], 80)} | "
                         f"{inert(row['baseline_condition'], 80)} | {fmt.estimate(row)} | "
                         f"{row['n_tasks']} | {runs['retained']} | {runs['lost']} | "
                         f"{runs['unavailable']} | {other['runs_passing']}/{other['runs_valid']} "
                         f"runs of {other['tasks']} tasks |")
        lines.append("")
    lines += ["### Runs and their baseline runs", "",
              "| run | baseline run | baseline outcome | workspace digest | outcome |",
              "|---|---|---|---|---|"]
    for link in block["links"]:
        lines.append(f"| {inert(link['trial_id'], 200)} | {inert(link['baseline_trial'], 200)} "
                     f"(attempt {link['baseline_attempt']}) | {link['baseline_outcome']} | "
                     f"{_digest(link['workspace_digest'])} | "
                     f"{link['outcome'] or fmt.UNAVAILABLE} |")
    return lines + [""]
