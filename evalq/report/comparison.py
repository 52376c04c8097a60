"""`evalq compare` as a document: the same comparison the terminal shows, as Markdown and as a
self-contained HTML page (with its forest plot), beside the JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalq.fileio import write_text_atomic

from evalq.analysis.condition_metrics import LABELS
from evalq.report import fmt
from evalq.report.answer import effect_with_ci
from evalq.report.charts import forest_plot
from evalq.report.definitions import DEFINITIONS
from evalq.report.html import markdown_to_html, page
from evalq.report.json_text import dumps
from evalq.report.markdown import comparison_lines, metrics_table
from evalq.report.mdtext import inert


def describe_side(pinned: dict) -> str:
    """A compared side's agent code: its commit, and its source digest when it has one."""
    source = pinned.get("agent_source")
    commit = pinned.get("commit") or "unavailable"
    if not source:
        return f"commit {commit}"
    named = f" ({source['name']})" if source.get("name") else ""
    dirty = ", with uncommitted changes" if source.get("dirty") else ""
    return f"commit {commit}{named}, agent source {source.get('digest')}{dirty}"


def _title(result: dict[str, Any]) -> str:
    return f"evalq compare: {result['candidate']} - {result['baseline']}"


def comparison_markdown(result: dict[str, Any]) -> str:
    comp, tests = result["comparison"], result["tests"]
    lines = [f"# evalq compare: {inert(result['candidate'], 200, False)} - "
             f"{inert(result['baseline'], 200, False)}", "", "## Answer", ""]
    for role in ("baseline", "candidate"):
        lines.append(f"- {role}: {inert(result[role], 200, False)}: "
                     f"{inert(describe_side(comp['pinned'][role]), 300, False)}")
    for metric, m in comp["metrics"].items():
        if not m["primary"]:
            continue
        line = f"- result: {LABELS[metric]} candidate - baseline: {effect_with_ci(m)}"
        if tests:
            line += f", p {fmt.number(m['p_value'], 4)}"
        lines.append(line + f" ({m['n_tasks']} paired tasks)")
    lines.append(f"- pinned inputs: compatible; k = {result['k']}; "
                 + ("two-sided paired permutation test" if tests else
                    "uncertainty only (95% CIs): a side is in commit-comparison mode"))
    lines += [f"- **warning**: {inert(w, 300, False)}: that side measured a broken agent, "
              "not a weak one" for w in result.get("warnings") or []]
    lines += ["", "## Metrics per side (estimate [95% CI])", ""]
    lines += metrics_table({name: {"metrics": m} for name, m in result["conditions"].items()})
    lines += ["## Paired comparison (candidate - baseline, per-task differences)", ""]
    lines += comparison_lines(comp, tests, False)
    lines += ["## Metric definitions", ""] + [f"- {n}: {t}" for n, t in DEFINITIONS] + [""]
    return "\n".join(lines)


def comparison_html(result: dict[str, Any]) -> str:
    comp = result["comparison"]
    rows = [{"metric": LABELS[metric], "comparison": f"{result['candidate']} - "
             f"{result['baseline']}", "delta": m["delta"], "low": m["ci_low"],
             "high": m["ci_high"]} for metric, m in comp["metrics"].items()]
    body = []
    for element in markdown_to_html(comparison_markdown(result)):
        body.append(element)
        if element.startswith("<h2>Paired comparison"):
            body.append(forest_plot(rows))
    return page(_title(result), body)


def write_comparison(result: dict[str, Any], path: Path) -> None:
    """One file, in the format its suffix names (.md, .html, else JSON), never half-written."""
    if path.suffix.lower() == ".md":
        text = comparison_markdown(result)
    elif path.suffix.lower() in (".html", ".htm"):
        text = comparison_html(result)
    else:
        text = dumps(result, indent=2) + "\n"
    write_text_atomic(path, text)
