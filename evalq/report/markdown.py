"""Markdown rendering of a computed report. Missing numbers read 'unavailable', never 0.

In commit-comparison mode the report shows intervals only: no test results and no wording
that claims or denies an effect.
"""

from __future__ import annotations

from typing import Any

from evalq.report.agent_error_lines import agent_error_lines
from evalq.report.integrity import integrity_lines
from evalq.analysis.condition_metrics import LABELS, METRICS, label
from evalq.analysis.pinned import describe
from evalq.models import OUTCOMES
from evalq.ops.environments import describe as describe_environments
from evalq.analysis.pinning import describe as describe_pinning
from evalq.plaintext import one_line
from evalq.report import fmt
from evalq.report.preregistration import describe as describe_plan
from evalq.planning.wall_check import describe as describe_wall_time

fmt_rate = fmt.rate  # kept for callers of the first report version


def _sealed(block: dict[str, Any] | None) -> str:
    if not block or block["sealed"] is None:
        return "unavailable (attempts recorded no agent sandbox)"
    ran = ", ".join(f"{name} ×{count}" for name, count in block["backends"].items())
    return ("sealed" if block["sealed"] else "**unsealed**") + (f" ({ran})" if ran else "")


def _header(report: dict[str, Any]) -> list[str]:
    study, trials, claims = report["study"], report["trials"], report["claims"]
    lock = study["lock_digest"] or ""
    lines = [f"# evalq report: {study['id']}", "",
             f"- mode: {study['mode']}; seed {study['seed']}; {study['repetitions']} "
             f"repetitions; lock `{lock[:23]}…`; source {study['source']}",
             f"- trials: {trials['planned']} planned, {trials['finished']} finished, "
             f"{trials['pending']} pending", f"- counting: {report['counting']}",
             f"- claims: **{claims['status']}**"
             + (f" ({'; '.join(claims['reasons'])})" if claims["reasons"] else ""),
             f"- power_warning: **{'yes' if report['power_warning'] else 'no'}**"
             + (f" ({'; '.join(report['power_warning_reasons'])})"
                if report["power_warning_reasons"] else ""),
             "- worker environments: "
             + (f"**{describe_environments(report['worker_environments'])}**"
                if report.get("worker_environments") else "all attempts ran in one environment"),
             f"- agent sandbox: {_sealed(report.get('agent_sandbox'))}",
             f"- power plan: {describe_plan(report.get('power_plan'))}",
             f"- wall time: {describe_wall_time(report.get('wall_time'))}",
             f"- pinned models: {describe_pinning(report.get('model_pinning'))}"]
    boot = report["inference"]["bootstrap"]
    lines.append(f"- intervals: 95% {boot['method']} bootstrap over tasks, "
                 f"{boot['n_resamples']:,} resamples, seed {boot['seed']}")
    if report["inference"]["tests"]:
        lines.append("- tests: two-sided paired permutation test (exact up to 16 tasks, else "
                     "10,000 random sign flips); Holm-Bonferroni over the primary family")
    else:
        lines.append(f"- {report['inference']['note']}")
    return lines + [""]


def _outcomes(report: dict[str, Any]) -> list[str]:
    lines = ["## Outcomes per condition", "",
             "| condition | " + " | ".join(OUTCOMES) + " | success rate | first-attempt rate |",
             "|---|" + "---|" * (len(OUTCOMES) + 2)]
    for name, summary in report["conditions"].items():
        counts = " | ".join(str(summary["outcomes"][o]) for o in OUTCOMES)
        lines.append(f"| {name} | {counts} | {fmt.rate(summary['success_rate'])} | "
                     f"{fmt.rate(summary['first_attempt']['success_rate'])} |")
    return lines + ["", "Grading and infrastructure failures are counted apart and never as "
                    "incorrect; success rate = correct / (correct + incorrect + timed_out).", ""]


def _metrics_table(conditions: dict[str, Any]) -> list[str]:
    names = list(conditions)
    lines = ["| metric | k | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for metric in METRICS:
        cells = [fmt.estimate(conditions[n]["metrics"][metric]) for n in names]
        k = conditions[names[0]]["metrics"][metric].get("k") if names else None
        lines.append(f"| {LABELS[metric]} | {k} | " + " | ".join(cells) + " |")
    return lines + [""] + _pass_k_table(conditions)


def _pass_k_table(conditions: dict[str, Any]) -> list[str]:
    """pass@k and pass^k for every k = 1 … n, one row per (k, condition)."""
    lines = ["pass@k (at least one of k runs passes) and pass^k (all k pass), unbiased "
             "estimators over each task's runs:", "",
             "| k | condition | pass@k | pass^k | tasks |", "|---|---|---|---|---|"]
    for name, block in conditions.items():
        for row in block.get("pass_k") or []:
            lines.append(f"| {row['k']} | {name} | {fmt.estimate(row['pass_at_k'])} | "
                         f"{fmt.estimate(row['pass_hat_k'])} | {row['pass_at_k']['n_tasks']} |")
    return lines + [""]


def _metrics(report: dict[str, Any]) -> list[str]:
    lines = ["## Metrics per condition (estimate [95% CI])", ""]
    tracks = report["tracks"]
    if len(tracks) == 1:
        return lines + _metrics_table(report["conditions"])
    lines.append("This study has several tracks; metrics are reported per track and never "
                 "aggregated across them.")
    lines.append("")
    for track, block in tracks.items():
        lines += [f"### Track: {track}", ""] + _metrics_table(block["conditions"])
    return lines


def _comparison(comp: dict[str, Any], tests: bool, several_tracks: bool) -> list[str]:
    title = f"### {comp['candidate']} - {comp['baseline']}"
    if several_tracks:
        title += f" (track {comp['track']})"
    ids = ", ".join(h["id"] for h in comp["hypotheses"])
    lines = [title, ""]
    if ids:
        lines.append(f"- hypotheses: {ids}")
    if comp["compatible"]:
        lines.append("- pinned inputs: compatible")
    else:
        lines.append("- pinned inputs: **INCOMPATIBLE** (differ in "
                     f"{', '.join(comp['incompatible_fields'])}); this is not a like-for-like "
                     "comparison")
    lines.append("")
    head = "| metric | primary | tasks | delta | 95% CI |"
    rule = "|---|---|---|---|---|"
    if tests:
        head += " p (permutation) | p (Holm) |"
        rule += "---|---|"
    lines += [head, rule]
    for metric, m in comp["metrics"].items():
        row = (f"| {label(metric, m.get('k'))} | {'yes' if m['primary'] else 'no'} | {m['n_tasks']} | "
               f"{fmt.with_reason(fmt.signed(m['delta']), m['reason'])} | "
               f"{fmt.interval(m['ci_low'], m['ci_high'], True)} |")
        if tests:
            row += f" {fmt.number(m['p_value'], 4)} | " + (
                fmt.number(m["p_holm"], 4) if m["primary"] else "descriptive") + " |"
        lines.append(row)
    lines.append("")
    for metric, m in comp["metrics"].items():
        if m["primary"] and m["per_task"]:
            lines.append(f"Per-task differences in {label(metric, m.get('k'))}: " + ", ".join(
                f"{t} {fmt.signed(d)}" for t, d in m["per_task"].items()))
            lines.append("")
    pinned = comp["pinned"]
    lines += ["| pinned input | baseline | candidate |", "|---|---|---|"]
    for key in sorted(pinned["baseline"]):
        lines.append(f"| {key} | {describe(pinned['baseline'][key])} | "
                     f"{describe(pinned['candidate'].get(key))} |")
    return lines + [""]


def _comparisons(report: dict[str, Any]) -> list[str]:
    lines = ["## Paired comparisons (candidate - baseline, per-task differences)", ""]
    if not report["comparisons"]:
        return lines + ["No comparison: the study has one condition.", ""]
    for comp in report["comparisons"]:
        lines += _comparison(comp, report["inference"]["tests"], len(report["tracks"]) > 1)
    return lines


def _grid(report: dict[str, Any]) -> list[str]:
    names = list(report["conditions"])
    lines = ["## Task x condition pass rate", "",
             "| task | track | split | " + " | ".join(names) + " |",
             "|---|---|---|" + "---|" * len(names)]
    for task, row in report["task_grid"].items():
        split = row["split"] or "unlabelled"
        if row["suitable"] is False:
            split += " (unsuitable: a correct exclusion counts as correct)"
        lines.append(f"| {task} | {row['track']} | {split} | "
                     + " | ".join(fmt.rate(row["pass_rate"][n]) for n in names) + " |")
    return lines + [""]


def _cost(report: dict[str, Any]) -> list[str]:
    lines = ["## Cost and tokens", "",
             "| condition | total cost (complete runs) | cost per success | incomplete runs | "
             "input tokens | output tokens | cache read | cache write |",
             "|---|---|---|---|---|---|---|---|"]
    for name, cost in report["cost"].items():
        tokens = report["conditions"][name]["tokens"]

        def tok(key: str) -> str:
            t = tokens[key]
            text = fmt.count(t["total"])
            return text + (f" ({t['runs_missing']} runs unreported)" if t["runs_missing"]
                           and t["total"] is not None else "")

        lines.append(f"| {name} | {fmt.usd(cost['total'])} | "
                     f"{fmt.with_reason(fmt.usd(cost['per_success']), cost['per_success_reason'])}"
                     f" | {cost['incomplete_runs']} of {cost['attempts']} | {tok('input_tokens')} | "
                     f"{tok('output_tokens')} | {tok('cache_read_tokens')} | "
                     f"{tok('cache_write_tokens')} |")
    lines += ["", "Cost per success = cost of all attempts / correct runs. Runs with incomplete "
              "accounting are flagged and left out of cost totals.", ""]
    skills = [(n, c["skill_activation"]) for n, c in report["conditions"].items()]
    lines += ["| condition | skill | loaded | not loaded | unknown | misses | false positives |",
              "|---|---|---|---|---|---|---|"]
    for name, s in skills:
        lines.append(f"| {name} | {s['skill'] or 'none'} | {s['loaded']} | {s['not_loaded']} | "
                     f"{s['unknown']} | {fmt.count(s['misses'])} | "
                     f"{fmt.count(s['false_positives'])} |")
    return lines + [""]


def _reliability(report: dict[str, Any]) -> list[str]:
    lines = ["## Inter-rater reliability", ""]
    if not report["reliability"]:
        return lines + [report["reliability_note"] or "unavailable", ""]
    flag = report["low_reliability"]
    lines.append(f"- low reliability: **{fmt.yes_no(flag)}**"
                 + (f" ({'; '.join(report['reliability_reasons'])})"
                    if report["reliability_reasons"] else ""))
    lines += ["", "| outcome | primary | kind | raw agreement | kappa | Krippendorff's alpha | "
              "positive rate | runs | ratings per run |", "|---|---|---|---|---|---|---|---|---|"]
    for outcome, block in report["reliability"].items():
        lines.append(f"| {outcome} | {'yes' if block['primary'] else 'no'} | "
                     + _agreement_cells(block))
        for cond, sub in block["by_condition"].items():
            lines.append(f"| {outcome} ({cond}) | | " + _agreement_cells(sub))
    return lines + ["", "Kappa: Cohen's for two raters who scored every run, else Fleiss' "
                    "(generalised to any number of ratings per run); Krippendorff's alpha "
                    "(nominal) is the missing-data check beside it.", ""]


def _agreement_cells(block: dict[str, Any]) -> str:
    per_run = ", ".join(f"{n}: {c}" for n, c in (block.get("ratings_per_item") or {}).items())
    return (f"{block['kind'] or 'unavailable'} | {fmt.rate(block['agreement'])} | "
            f"{fmt.number(block['kappa'])} | {fmt.number(block.get('alpha'))} | "
            f"{fmt.rate(block['positive_rate'])} | {block['n_items']} | "
            f"{per_run or 'unavailable'} |")


def _tracks(report: dict[str, Any]) -> list[str]:
    lines = ["## Tracks", "", "| track | tasks | splits | unsuitable tasks | correct exclusions |",
             "|---|---|---|---|---|"]
    for track, block in report["tracks"].items():
        splits = ", ".join(f"{k} {v}" for k, v in block["splits"].items())
        excl = ", ".join(f"{k} {v}" for k, v in block["correct_exclusions"].items())
        lines.append(f"| {track} | {len(block['tasks'])} | {splits} | "
                     f"{len(block['unsuitable_tasks'])} | {excl if block['unsuitable_tasks'] else 'n/a'} |")
    return lines + [""]


RUNS_SHOWN = 200


def _per_request(values: Any) -> str:
    if not values:
        return fmt.UNAVAILABLE
    shown = ", ".join(f"{v:,}" for v in values[:8])
    return shown + (f", … ({len(values)} requests)" if len(values) > 8 else "")


def _wire_disagreements(rows: list[dict[str, Any]]) -> list[str]:
    """Runs whose own token report differs from what the model gateway metered on the wire."""
    metered = [r for r in rows if r.get("wire_requests") is not None]
    if not metered:
        return []
    differ = [r for r in metered if r.get("accounting_disagrees")]
    lines = [f"Model gateway: {len(metered)} run(s) metered on the wire, whose counts are "
             f"the ones counted here; {len(differ)} disagree with the agent's own report."]

    def counts(row: dict[str, Any], prefix: str) -> str:
        return ", ".join(fmt.count(row.get(prefix + k)) for k in row["accounting_disagrees"])

    lines += [f"- {r['trial_id']}: {', '.join(r['accounting_disagrees'])} (agent "
              f"{counts(r, 'agent_')}; wire {counts(r, 'wire_')})" for r in differ[:RUNS_SHOWN]]
    return lines + [""]


def _runs(report: dict[str, Any]) -> list[str]:
    """Per-run metrics (SPEC R5), with reported prompt tokens and estimated context apart."""
    rows = report.get("trial_rows") or []
    lines = ["## Runs", "", *_wire_disagreements(rows)]
    if len(rows) > RUNS_SHOWN:
        return lines + [f"{len(rows):,} runs: too many to list here; every run's metrics are "
                        "in report.json (`trial_rows`) and `evalq export`.", ""]
    lines += ["| trial | outcome | reason | input | output | cache read | cache write | reported "
              "prompt tokens per request | estimated context tokens per request | tool calls "
              "(failed) | seconds | stop reason | cost |", "|---|" + "---|" * 12]
    for r in rows:
        calls = fmt.count(r.get("tool_calls"))
        if r.get("tool_failures") is not None:
            calls += f" ({r['tool_failures']})"
        lines.append(
            f"| {r['trial_id']} | {r['outcome'] or 'pending'} | {_cell(r.get('reason'))} "
            f"| {fmt.count(r['input_tokens'])} "
            f"| {fmt.count(r['output_tokens'])} | {fmt.count(r.get('cache_read_tokens'))} "
            f"| {fmt.count(r.get('cache_write_tokens'))} "
            f"| {_per_request(r.get('reported_prompt_tokens_per_request'))} "
            f"| {_per_request(r.get('estimated_context_tokens_per_request'))} | {calls} "
            f"| {fmt.number(r['duration_seconds'], 1)} | {_cell(r.get('stop_reason'), 60) or fmt.UNAVAILABLE} "
            f"| {fmt.usd(r['cost_usd'])} |")
    return lines + ["", "Reported prompt tokens are the provider's (input + cache read + cache "
                    "write per request); estimated context is evalq's count of the message "
                    "text the agent's trajectory says it sent, characters / 4, where the agent "
                    "records it. Missing values read unavailable.", ""]


def _cell(text: str | None, limit: int = 120) -> str:
    """Free text (a failure's or a stop's reason, maybe the agent's words) made safe for one
    table cell: one line (evalq.plaintext), its pipes escaped."""
    return one_line(text, limit).replace("|", "\\|")


def render_markdown(report: dict[str, Any]) -> str:
    lines = (_header(report) + _outcomes(report) + agent_error_lines(report) + _metrics(report) + _comparisons(report)
             + _grid(report) + _cost(report) + _reliability(report) + _tracks(report)
             + integrity_lines(report.get("grading_integrity")) + _runs(report))
    return "\n".join(lines)
