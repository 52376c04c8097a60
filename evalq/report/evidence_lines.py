"""The report's "Evidence record" section (a study run from a task manifest) and the
per-split lines of its "Tracks" section."""

from __future__ import annotations

from typing import Any

from evalq.report import fmt
from evalq.report.mdtext import inert

#: trials listed in Markdown; report.json and `evalq export --format evidence` hold them all
TRIALS_SHOWN = 200


def _text(value: Any, limit: int = 200) -> str:
    if value is None or value == []:
        return fmt.UNAVAILABLE
    if isinstance(value, bool):
        return fmt.yes_no(value)
    if isinstance(value, dict):
        return ", ".join(f"{k} {_text(v)}" for k, v in value.items()) or fmt.UNAVAILABLE
    if isinstance(value, list):
        return "; ".join(inert(str(v), limit) for v in value)
    return inert(str(value), limit)


def evidence_lines(report: dict[str, Any]) -> list[str]:
    record = report.get("evidence")
    if not record:
        return []
    manifest, package = record["task_manifest"], record["package"]
    tool, model, env, budgets = (record["tool"], record["model"], record["environment"],
                                 record["budgets"])
    lines = ["## Evidence record", "",
             "As the task manifest pre-registered it; unavailable where nothing recorded it.", "",
             "| field | value |", "|---|---|",
             f"| task manifest | {_text(manifest['path'])} ({_text(manifest['digest'])}), "
             f"schemaVersion {manifest['schema_version']}, protocol {_text(manifest['protocol'])} |",
             f"| coding tool | {_text(tool['name'])} {_text(tool['version'])} |",
             f"| model | {_text(model['name'])} {_text(model['version'])} |",
             f"| package | {_text(package['name'])}, registry {_text(package['registry'])} |",
             f"| operating system | {_text(env['os'])} |",
             f"| toolchain | {_text(env['toolchain'])} |",
             f"| permissions | {_text(env['permissions'])} |",
             f"| budget | {_text(budgets['max_steps'])} steps |",
             f"| time limit | {_text(budgets['timeout_seconds'])} s |",
             f"| conditions | {_text({k: v.get('skill') for k, v in record['conditions'].items()})} |",
             f"| limitations | {_text(record['limitations'], 300)} |", "",
             "| task | track | kind | suitable | published version | upgrade | prompt |",
             "|---|---|---|---|---|---|---|"]
    for task, t in record["tasks"].items():
        upgrade = (f"{_text(t['baseline_version'])} → {_text(t['target_version'])}"
                   if t["track"] == "upgrade" else "n/a")
        lines.append(f"| {inert(task, 120)} | {_text(t['track'])} | {_text(t['kind'])} | "
                     f"{_text(t['suitable'])} | {_text(t['package_version'])} | {upgrade} | "
                     f"{_text(t['prompt'], 300)} |")
    lines += ["", "| trial | date (UTC) | condition | outcome |", "|---|---|---|---|"]
    for trial in record["trials"][:TRIALS_SHOWN]:
        lines.append(f"| {inert(trial['trial_id'], 200)} | {_text(trial['date'])} | "
                     f"{inert(trial['condition'], 80)} | {_text(trial['outcome'])} |")
    if len(record["trials"]) > TRIALS_SHOWN:
        lines.append(f"\n{len(record['trials']) - TRIALS_SHOWN} more trial(s) in report.json.")
    return lines + [""]


def kind_split_lines(tracks: dict[str, Any]) -> list[str]:
    """Per track, split and condition: regression and held-out tasks never in one figure."""
    lines = ["| track | split | condition | tasks | judged runs | correct | success rate |",
             "|---|---|---|---|---|---|---|"]
    for track, block in tracks.items():
        for split, conditions in (block.get("by_split") or {}).items():
            for name, cell in conditions.items():
                lines.append(f"| {inert(track, 80)} | {inert(split, 60)} | {inert(name, 80)} | "
                             f"{cell['tasks']} | {cell['runs']} | {cell['correct']} | "
                             f"{fmt.rate(cell['success_rate'])} |")
    return lines + [""]
