"""Markdown rendering of a computed report. Missing numbers read 'unavailable', never 0.

The answer first (evalq/report/answer.py), then the detail a reviewer checks it by, and last
the design and the digests it is pinned by. Every string evalq did not write itself (names,
reasons, model names, stop reasons, stderr) goes through evalq.report.mdtext.inert.
In commit-comparison mode the report shows intervals only: no test results and no wording
that claims or denies an effect.
"""

from __future__ import annotations

from typing import Any

from evalq.report.activation_lines import activation_lines
from evalq.report.agent_error_lines import agent_error_lines
from evalq.report.criteria_lines import criteria_lines
from evalq.report.session_lines import session_lines
from evalq.report.stage_lines import stage_lines
from evalq.report.integrity import integrity_lines
from evalq.analysis.condition_metrics import LABELS, METRICS, label
from evalq.analysis.pinned import describe
from evalq.models import OUTCOMES
from evalq.ops.environments import describe as describe_environments
from evalq.report import fmt
from evalq.report.answer import answer_lines
from evalq.report.definitions import definition_lines
from evalq.plaintext import one_line
from evalq.report.mdtext import code_span, inert
from evalq.report.preregistration import describe as describe_plan
from evalq.report.review_lines import coverage_lines, split_lines
from evalq.report.evidence_lines import evidence_lines, kind_split_lines
from evalq.planning.wall_check import describe as describe_wall_time

fmt_rate = fmt.rate  # kept for callers of the first report version


def _sealed(block: dict[str, Any] | None) -> str:
    if not block or block["sealed"] is None:
        return "unavailable (attempts recorded no agent sandbox)"
    ran = ", ".join(f"{name} ×{count}" for name, count in block["backends"].items())
    return ("sealed" if block["sealed"] else "**unsealed**") + (f" ({ran})" if ran else "")


def _pinning(block: dict[str, Any] | None) -> str:
    """Whether the runs asked the gateway only for their condition's models; the models they
    asked for are the agent's words, shown inert."""
    if not block:
        return fmt.UNAVAILABLE
    checked = sum(e["runs_checked"] for e in block.values())
    off = {n: e for n, e in block.items() if e["off_pin_runs"]}
    if not checked:
        return f"{fmt.UNAVAILABLE} (no run was metered by the model gateway against a pinned model)"
    if not off:
        return f"held ({checked} metered run(s) asked only for their condition's models)"
    return "**not held**: " + "; ".join(
        f"{inert(n, 80, False)}: {e['off_pin_runs']} of {e['runs_checked']} run(s) asked for "
        f"{inert(', '.join(e['off_pin_models']), 200, False)}" for n, e in off.items())


def _digest(value: str | None) -> str:
    return f"`{value}`" if value else fmt.UNAVAILABLE


def _provenance(report: dict[str, Any]) -> list[str]:
    """Design, inference and the digests the result is pinned by, with the pre-registration."""
    study = report["study"]
    digests = (report.get("overview") or {}).get("digests") or {}
    lines = ["## Design and provenance", "",
             f"- study: {inert(study['id'], 200, False)}; mode: {study['mode']}; seed "
             f"{study['seed']}; {study['repetitions']} repetitions; source {study['source']}",
             f"- manifest digest: {_digest(digests.get('manifest_digest'))}",
             f"- lock digest: {_digest(study['lock_digest'])}",
             f"- suite digest: {_digest(digests.get('suite_digest'))}",
             f"- pre-registration, power plan: {describe_plan(report.get('power_plan'))}",
             f"- counting: {report['counting']}",
             f"- power_warning: **{'yes' if report['power_warning'] else 'no'}**"
             + (f" ({'; '.join(inert(r, 300, False) for r in report['power_warning_reasons'])})"
                if report["power_warning_reasons"] else ""),
             "- worker environments: "
             + (f"**{inert(describe_environments(report['worker_environments']), 400, False)}**"
                if report.get("worker_environments") else "all attempts ran in one environment"),
             f"- agent sandbox: {_sealed(report.get('agent_sandbox'))}",
             f"- wall time: {describe_wall_time(report.get('wall_time'))}",
             f"- pinned models: {_pinning(report.get('model_pinning'))}"]
    boot = report["inference"]["bootstrap"]
    lines.append(f"- intervals: 95% {boot['method']} bootstrap over tasks, "
                 f"{boot['n_resamples']:,} resamples, seed {boot['seed']}")
    if report["inference"]["tests"]:
        lines.append("- tests: two-sided paired permutation test (exact up to 16 tasks, else "
                     "10,000 random sign flips); Holm-Bonferroni over the primary family")
    else:
        lines.append(f"- {report['inference']['note']}")
    return lines + [""]


def _agent_errors(report: dict[str, Any], name: str) -> str:
    """'3 of 9 (exited with an error before any model call 3)', or unavailable."""
    block = (report.get("agent_errors") or {}).get(name)
    if not block:
        return fmt.UNAVAILABLE
    kinds = ", ".join(f"{inert(k, 80)} {n}" for k, n in (block.get("by_kind") or {}).items() if n)
    return f"{block['errors']} of {block['runs']}" + (f" ({kinds})" if kinds else "")


def _outcomes(report: dict[str, Any]) -> list[str]:
    errors = "agent_errors" in report  # reports computed before it have no such column
    lines = ["## Outcomes per condition", "",
             "| condition | " + " | ".join(OUTCOMES) + (" | agent errors" if errors else "")
             + " | success rate | first-attempt rate |",
             "|---|" + "---|" * (len(OUTCOMES) + 2 + errors)]
    for name, summary in report["conditions"].items():
        counts = " | ".join(str(summary["outcomes"][o]) for o in OUTCOMES)
        lines.append(f"| {inert(name, 80)} | {counts} | "
                     + (f"{_agent_errors(report, name)} | " if errors else "")
                     + f"{fmt.rate(summary['success_rate'])} | "
                     f"{fmt.rate(summary['first_attempt']['success_rate'])} |")
    notes = ["", "Grading and infrastructure failures are counted apart and never as "
             "incorrect; success rate = correct / (correct + incorrect + timed_out)."]
    if errors:
        notes.append("Agent errors (the agent exited with an error, was killed, or made no "
                     "model call) keep their outcome, usually incorrect: they are counted here "
                     "so a broken agent is not read as a weak one.")
    return lines + notes + [""]


def metrics_table(conditions: dict[str, Any]) -> list[str]:
    names = list(conditions)
    lines = ["| metric | k | " + " | ".join(inert(n, 80) for n in names) + " |",
             "|---|---|" + "---|" * len(names)]
    for metric in METRICS:
        cells = [fmt.estimate(conditions[n]["metrics"][metric]) for n in names]
        k = conditions[names[0]]["metrics"][metric].get("k") if names else None
        lines.append(f"| {LABELS[metric]} | {k} | " + " | ".join(cells) + " |")
    return lines + [""] + _pass_k_table(conditions)


def _pass_k_table(conditions: dict[str, Any]) -> list[str]:
    """pass@k and pass^k for every k = 1 … n, one row per (k, condition); none without rows."""
    if not any(block.get("pass_k") for block in conditions.values()):
        return []
    lines = ["pass@k (at least one of k runs passes) and pass^k (all k pass), unbiased "
             "estimators over each task's runs:", "",
             "| k | condition | pass@k | pass^k | tasks |", "|---|---|---|---|---|"]
    for name, block in conditions.items():
        for row in block.get("pass_k") or []:
            lines.append(f"| {row['k']} | {inert(name, 80)} | {fmt.estimate(row['pass_at_k'])} | "
                         f"{fmt.estimate(row['pass_hat_k'])} | {row['pass_at_k']['n_tasks']} |")
    return lines + [""]


def _metrics(report: dict[str, Any]) -> list[str]:
    lines = ["## Metrics per condition (estimate [95% CI])", ""]
    tracks = report["tracks"]
    if len(tracks) == 1:
        return lines + metrics_table(report["conditions"])
    lines.append("This study has several tracks; metrics are reported per track and never "
                 "aggregated across them.")
    lines.append("")
    for track, block in tracks.items():
        lines += [f"### Track: {inert(track, 80, False)}", ""] + metrics_table(block["conditions"])
    return lines


def comparison_lines(comp: dict[str, Any], tests: bool, several_tracks: bool) -> list[str]:
    title = f"### {inert(comp['candidate'], 80, False)} - {inert(comp['baseline'], 80, False)}"
    if several_tracks:
        title += f" (track {inert(comp['track'], 80, False)})"
    ids = ", ".join(inert(h["id"], 40, False) for h in comp["hypotheses"])
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
                f"{inert(t, 80, False)} {fmt.signed(d)}" for t, d in m["per_task"].items()))
            lines.append("")
    pinned = comp["pinned"]
    lines += ["| pinned input | baseline | candidate |", "|---|---|---|"]
    for key in sorted(pinned["baseline"]):
        lines.append(f"| {key} | {inert(describe(pinned['baseline'][key]), 300)} | "
                     f"{inert(describe(pinned['candidate'].get(key)), 300)} |")
    return lines + [""]


def _comparisons(report: dict[str, Any]) -> list[str]:
    lines = ["## Paired comparisons (candidate - baseline, per-task differences)", ""]
    if not report["comparisons"]:
        return lines + ["No comparison: the study has one condition.", ""]
    for comp in report["comparisons"]:
        lines += comparison_lines(comp, report["inference"]["tests"], len(report["tracks"]) > 1)
    return lines


def _grid(report: dict[str, Any]) -> list[str]:
    names = list(report["conditions"])
    lines = ["## Task x condition pass rate", "",
             "| task | track | split | " + " | ".join(inert(n, 80) for n in names) + " |",
             "|---|---|---|" + "---|" * len(names)]
    for task, row in report["task_grid"].items():
        split = inert(row["split"], 60) or "unlabelled"
        if row["suitable"] is False:
            split += " (unsuitable: a correct exclusion counts as correct)"
        lines.append(f"| {inert(task, 120)} | {inert(row['track'], 60)} | {split} | "
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

        lines.append(f"| {inert(name, 80)} | {fmt.usd(cost['total'])} | "
                     f"{fmt.with_reason(fmt.usd(cost['per_success']), cost['per_success_reason'])}"
                     f" | {cost['incomplete_runs']} of {cost['attempts']} | {tok('input_tokens')} | "
                     f"{tok('output_tokens')} | {tok('cache_read_tokens')} | "
                     f"{tok('cache_write_tokens')} |")
    lines += ["", "Cost per success = cost of all attempts / correct runs. Runs with incomplete "
              "accounting are flagged and left out of cost totals.", ""]
    return lines


def _reliability(report: dict[str, Any]) -> list[str]:
    lines = ["## Inter-rater reliability", ""] + coverage_lines(report)
    if not report["reliability"]:
        return lines + [report["reliability_note"] or "unavailable", ""]
    flag = report["low_reliability"]
    lines.append(f"- low reliability: **{fmt.yes_no(flag)}**"
                 + (f" ({'; '.join(inert(r, 300, False) for r in report['reliability_reasons'])})"
                    if report["reliability_reasons"] else ""))
    lines += ["", "| outcome | primary | kind | raw agreement | kappa | Krippendorff's alpha | "
              "positive rate | runs | ratings per run |", "|---|---|---|---|---|---|---|---|---|"]
    for outcome, block in report["reliability"].items():
        lines.append(f"| {inert(outcome, 80)} | {'yes' if block['primary'] else 'no'} | "
                     + _agreement_cells(block))
        for cond, sub in block["by_condition"].items():
            lines.append(f"| {inert(outcome, 80)} ({inert(cond, 80)}) | | " + _agreement_cells(sub))
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
        splits = ", ".join(f"{inert(k, 60)} {v}" for k, v in block["splits"].items())
        excl = ", ".join(f"{inert(k, 80)} {v}" for k, v in block["correct_exclusions"].items())
        lines.append(f"| {inert(track, 80)} | {len(block['tasks'])} | {splits} | "
                     f"{len(block['unsuitable_tasks'])} | {excl if block['unsuitable_tasks'] else 'n/a'} |")
    return lines + ["", "Regression and held-out (unseen) tasks apart:", ""] \
        + kind_split_lines(report["tracks"])


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

    lines += [f"- {inert(r['trial_id'], 200, False)}: {', '.join(r['accounting_disagrees'])} (agent "
              f"{counts(r, 'agent_')}; wire {counts(r, 'wire_')})" for r in differ[:RUNS_SHOWN]]
    return lines + [""]


def _calls(r: dict[str, Any]) -> str:
    calls = fmt.count(r.get("tool_calls"))
    return calls + (f" ({r['tool_failures']})" if r.get("tool_failures") is not None else "")


#: the run table's columns after trial and outcome: (heading, the row keys that fill it, cell)
RUN_COLUMNS = (
    ("reason", ("reason",), lambda r: inert(r.get("reason"), 120)),
    ("exit status", ("exit_code",), lambda r: fmt.count(r.get("exit_code"))),
    ("model calls", ("model_calls",), lambda r: fmt.count(r.get("model_calls"))),
    ("input", ("input_tokens",), lambda r: fmt.count(r.get("input_tokens"))),
    ("output", ("output_tokens",), lambda r: fmt.count(r.get("output_tokens"))),
    ("cache read", ("cache_read_tokens",), lambda r: fmt.count(r.get("cache_read_tokens"))),
    ("cache write", ("cache_write_tokens",), lambda r: fmt.count(r.get("cache_write_tokens"))),
    ("reported prompt tokens per request", ("reported_prompt_tokens_per_request",),
     lambda r: _per_request(r.get("reported_prompt_tokens_per_request"))),
    ("estimated context tokens per request", ("estimated_context_tokens_per_request",),
     lambda r: _per_request(r.get("estimated_context_tokens_per_request"))),
    ("tool calls (failed)", ("tool_calls", "tool_failures"), _calls),
    ("seconds", ("duration_seconds",), lambda r: fmt.number(r.get("duration_seconds"), 1)),
    ("stop reason", ("stop_reason",),
     lambda r: inert(r.get("stop_reason"), 60) or fmt.UNAVAILABLE),
    ("cost", ("cost_usd",), lambda r: fmt.usd(r.get("cost_usd"))),
    ("agent error", ("agent_error",), lambda r: inert(r.get("agent_error"), 80) or "none"),
    # the whole tail is on the run's transcript page
    ("last stderr line", ("stderr_last_line",),
     lambda r: inert(r.get("stderr_last_line"), 120) or fmt.UNAVAILABLE),
)


def run_columns(rows: list[dict[str, Any]], trim: bool) -> tuple[list, list[str]]:
    """The columns some run has data for (all of them when not `trim`), and the headings of
    those left out."""
    if not trim:
        return list(RUN_COLUMNS), []
    kept = [c for c in RUN_COLUMNS if any(r.get(k) not in (None, "", []) for r in rows
                                          for k in c[1])]
    return kept, [c[0] for c in RUN_COLUMNS if c not in kept]


def _trial_cell(trial_id: str, links: dict[str, str] | None) -> str:
    shown = inert(trial_id, 200)
    href = (links or {}).get(trial_id)
    return f"[{shown}]({href})" if href else shown


def run_table(rows: list[dict[str, Any]], links: dict[str, str] | None = None,
              trim: bool = True) -> tuple[list[str], list[str]]:
    """The run table's lines, and the headings of the columns no run has data for."""
    columns, left_out = run_columns(rows, trim)
    lines = ["| trial | outcome | " + " | ".join(c[0] for c in columns) + " |",
             "|---|---|" + "---|" * len(columns)]
    for r in rows:
        lines.append(f"| {_trial_cell(r['trial_id'], links)} | {r['outcome'] or 'pending'} | "
                     + " | ".join(c[2](r) for c in columns) + " |")
    return lines, left_out


def _runs(report: dict[str, Any], links: dict[str, str] | None = None,
          full_rows: str | None = None) -> list[str]:
    """Per-run metrics, with reported prompt tokens and estimated context apart; columns no
    run has data for are left out here and named (every column is in report.json,
    linked as `full_rows` when it is written beside this report)."""
    rows = report.get("trial_rows") or []
    where = f"[report.json]({full_rows})" if full_rows else "report.json"
    lines = ["## Runs", "", *_wire_disagreements(rows)]
    if len(rows) > RUNS_SHOWN:
        return lines + [f"{len(rows):,} runs: too many to list here; every run's metrics are "
                        f"in {where} (`trial_rows`) and `evalq export`.", "",
                        _transcripts_where(report, links), ""]
    table, left_out = run_table(rows, links)
    lines += table + [""]
    if left_out:
        lines.append(f"Unavailable for every run, so not shown: {', '.join(left_out)}. Every "
                     f"column of every run is in {where} (`trial_rows`).")
    if links:
        lines.append("Each trial links to its transcript page (what the agent said, called "
                     "and got back).")
    return lines + ["Reported prompt tokens are the provider's (input + cache read + cache "
                    "write per request); estimated context is evalq's count of the message "
                    "text the agent's trajectory says it sent, characters / 4, where the agent "
                    "records it. Missing values read unavailable.", ""]


def _transcripts_where(report: dict[str, Any], links: dict[str, str] | None) -> str:
    """Where a large study's transcript pages are: listed beside the report, or how to write
    them (a report does not write a page per run for a study that large by itself)."""
    if links:
        return ("Every run's transcript page (what the agent said, called and got back) is "
                "listed in [transcripts.html](transcripts.html).")
    command = code_span(one_line(f"evalq report {report['study']['id']} --transcripts", 240),
                        table=False)
    return ("Transcript pages are not written with the report of a study this large: "
            f"{command} writes one per run (listed in transcripts.html); `evalq show TRIAL` "
            "prints one run.")


def render_markdown(report: dict[str, Any], links: dict[str, str] | None = None,
                    full_rows: str | None = None) -> str:
    """`links`: trial id -> its transcript page, relative to where this report is written;
    `full_rows`: the relative link to report.json when it is written beside it."""
    lines = ([f"# evalq report: {inert(report['study']['id'], 200, False)}", ""]
             + answer_lines(report) + _outcomes(report) + agent_error_lines(report)
             + definition_lines(report)
             + _metrics(report) + _comparisons(report) + split_lines(report) + _grid(report)
             + _cost(report) + activation_lines(report)
             + _reliability(report) + _tracks(report) + criteria_lines(report)
             + stage_lines(report) + evidence_lines(report) + session_lines(report)
             + integrity_lines(report.get("grading_integrity")) + _runs(report, links, full_rows)
             + _provenance(report))
    return "\n".join(lines)
