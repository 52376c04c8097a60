"""The report's opening: the answer a reviewer signs, before any table of detail.

The question (hypotheses in words), what each condition ran, the primary result with its
interval (and, where tests run, p and Holm-adjusted p), the claims status with its reasons,
and n, dates, wall time and cost. In commit-comparison mode there is no test, so no p.
"""

from __future__ import annotations

from typing import Any, Optional

from evalq.analysis.condition_metrics import LABELS, label
from evalq.report import fmt
from evalq.report.mdtext import inert

_DIRECTION = {"greater": "higher than", "less": "lower than"}


def _question(hyp: dict[str, Any]) -> str:
    metric = LABELS.get(hyp.get("metric"), inert(hyp.get("metric"), 40, table=False))
    cand, base = inert(hyp.get("candidate"), 80, False), inert(hyp.get("baseline"), 80, False)
    kind = "primary" if hyp.get("primary", True) else "secondary"
    if hyp.get("direction") in _DIRECTION:
        words = f"is {metric} of {cand} {_DIRECTION[hyp['direction']]} that of {base}?"
    else:
        words = f"does {metric} of {cand} differ from that of {base}?"
    return f"{inert(hyp.get('id'), 40, False)} ({kind}): {words}"


def question_lines(report: dict[str, Any]) -> list[str]:
    hyps = report["study"].get("hypotheses") or []
    if hyps:
        return [f"- question: {_question(h)}" for h in hyps]
    names = list(report["conditions"])
    if len(names) < 2:
        return ["- question: how often does the one condition solve the tasks? (one condition: "
                "nothing is compared)"]
    metrics = ", ".join(LABELS.get(m, m) for m in report["study"].get("primary_metrics")
                        or ["tpr"])
    base = inert(names[0], 80, False)
    return [f"- question: does {metrics} of {', '.join(inert(n, 80, False) for n in names[1:])}"
            f" differ from that of {base}? (no hypotheses declared: the first condition is the "
            "baseline)"]


def _source(desc: dict[str, Any]) -> str:
    source = desc.get("source")
    if not source:
        commit = desc.get("commit")
        return f"commit label {inert(commit, 60)} (not checked)" if commit else "not pinned"
    commit = source.get("commit")
    named = f" ({inert(source['name'], 60)})" if source.get("name") else ""
    at = f"commit {inert(commit[:12] if commit else None) or 'unavailable'}{named}"
    dirty = ", with uncommitted changes" if source.get("dirty") else ""
    digest = (source.get("digest") or "")[:19]
    return f"{at}{dirty}; digest `{digest}…`" if digest else at + dirty


def condition_table(report: dict[str, Any]) -> list[str]:
    described = (report.get("overview") or {}).get("conditions") or {}
    lines = ["| condition | agent | model | agent source | skill |", "|---|---|---|---|---|"]
    for name in report["conditions"]:
        d = described.get(name) or {}
        lines.append(f"| {inert(name, 80)} | {inert(d.get('agent'), 60) or fmt.UNAVAILABLE} | "
                     f"{inert(d.get('model'), 80) or fmt.UNAVAILABLE} | {_source(d)} | "
                     f"{inert(d.get('skill'), 60) or 'none'} |")
    return lines + [""]


def effect_with_ci(m: dict[str, Any]) -> str:
    """A compared metric's difference in bold (or unavailable, with why) and its 95% CI."""
    effect = (f"**{fmt.signed(m['delta'])}**" if m["delta"] is not None else
              fmt.with_reason(fmt.UNAVAILABLE, inert(m.get("reason"), 200, False)))
    return f"{effect}, 95% CI {fmt.interval(m['ci_low'], m['ci_high'], True)}"


def _result(comp: dict[str, Any], metric: str, m: dict[str, Any], tests: bool,
            several_tracks: bool) -> str:
    pair = f"{inert(comp['candidate'], 80, False)} - {inert(comp['baseline'], 80, False)}"
    ids = ", ".join(inert(h.get("id"), 40, False) for h in comp.get("hypotheses") or []
                    if h.get("metric") == metric)
    track = f" (track {inert(comp.get('track'), 60, False)})" if several_tracks else ""
    text = f"{ids + ': ' if ids else ''}{label(metric, m.get('k'))} {pair}{track}: " \
        + effect_with_ci(m)
    if tests:
        text += f", p {fmt.number(m['p_value'], 4)}, Holm-adjusted p {fmt.number(m['p_holm'], 4)}"
    return text + f" ({m['n_tasks']} paired tasks)"


def result_lines(report: dict[str, Any]) -> list[str]:
    tests = report["inference"]["tests"]
    several = len(report["tracks"]) > 1
    shown = [_result(comp, metric, m, tests, several) for comp in report["comparisons"]
             for metric, m in comp["metrics"].items() if m["primary"]]
    if not shown:
        return ["- result: no comparison (the study has one condition)"]
    return [f"- result: {line}" for line in shown]


def claims_line(report: dict[str, Any]) -> str:
    claims = report["claims"]
    reasons = "; ".join(inert(r, 400, False) for r in claims["reasons"])
    return f"- claims: **{claims['status']}**" + (f" ({reasons})" if reasons else "")


def _duration(seconds: Optional[float]) -> str:
    if seconds is None:
        return fmt.UNAVAILABLE
    s = int(round(seconds))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h} h {m} min {s} s" if h else (f"{m} min {s} s" if m else f"{s} s")


def _total_cost(report: dict[str, Any]) -> str:
    totals = [c.get("total") for c in report["cost"].values()]
    if not totals:
        return fmt.UNAVAILABLE
    if any(t is None for t in totals):
        missing = sum(c.get("incomplete_runs") or 0 for c in report["cost"].values())
        return f"{fmt.UNAVAILABLE} (incomplete cost accounting in {missing} runs)"
    return fmt.usd(sum(totals))


def facts_lines(report: dict[str, Any]) -> list[str]:
    overview = report.get("overview") or {}
    design, timing = overview.get("design") or {}, overview.get("timing") or {}
    trials = report["trials"]
    shape = (f"{design.get('tasks')} tasks × {design.get('repetitions')} repetitions × "
             f"{design.get('conditions')} conditions = " if design else "")
    first, last = timing.get("first_started_at"), timing.get("last_finished_at")
    dates = f"{first} to {last}" if first and last else fmt.UNAVAILABLE
    return [f"- n: {shape}{trials['planned']} trials; {trials['finished']} finished, "
            f"{trials['pending']} pending",
            f"- dates: {dates}; wall time {_duration(timing.get('wall_seconds'))}",
            f"- cost: {_total_cost(report)}"]


def answer_lines(report: dict[str, Any]) -> list[str]:
    """The opening section: the verdict first, then the conditions it is about."""
    return (["## Answer", ""] + question_lines(report) + result_lines(report)
            + [claims_line(report)] + facts_lines(report) + [""] + condition_table(report))
