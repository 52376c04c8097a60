"""The report opens with the answer a reviewer signs: the question, what each condition ran
(with its pinned agent source), the primary result, the claims, n, dates, wall time and cost;
metric definitions say which metrics are one number at the design; agent errors sit beside
the outcomes; transcript links are there wherever the report is written."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import update
from sqlmodel import Session

from conftest import run_cli
from evalq.analysis.agent_errors import count_by_condition
from evalq.analysis.runs import study_runs
from evalq.report.compute import compute_report
from evalq.report.markdown import render_markdown
from evalq.results.store import AttemptRow, StudyRow
from report_native_rows import make_study

HYP = [{"id": "H1", "metric": "tpr", "baseline": "base", "candidate": "cand", "primary": True,
        "direction": "greater"}]
SOURCES = {"cand": {"digest": "sha256:" + "c" * 64, "commit": "9f0e" + "1" * 36, "name": "v3"}}


def _outcome(task, cond, rep):
    return "correct" if cond == "cand" or (task, rep) == ("t1", 1) else "incorrect"


def _study(tmp_path, k=3, lock_extra=None, timed=True):
    url = f"sqlite:///{tmp_path}/a.db"
    engine = make_study(url, "ans", k=k, outcome=_outcome, hypotheses=HYP,
                        metrics=lambda t, c, r: {"input_tokens": 10, "output_tokens": 2,
                                                 "cost_usd": 0.25})
    with Session(engine) as session:
        if lock_extra:
            row = session.get(StudyRow, "ans")
            row.lock = {**row.lock, **lock_extra}
            session.add(row)
        if timed:  # the first attempt starts at 1000 s, the last ends 125 s later
            session.exec(update(AttemptRow).values(started_at=1000.0 + AttemptRow.id,
                                                   finished_at=1005.0 + AttemptRow.id))
            session.exec(update(AttemptRow).where(AttemptRow.id == 1).values(started_at=1000.0))
        session.commit()
    return engine


def _answer(markdown: str) -> str:
    return markdown.split("## Answer", 1)[1].split("\n## ", 1)[0]


def test_the_answer_comes_first_with_every_part(tmp_path):
    engine = _study(tmp_path, lock_extra={"agent_sources": SOURCES,
                                          "manifest_digest": "sha256:" + "m" * 64})
    report = compute_report(engine, "ans", n_resamples=500)
    md = render_markdown(report)
    assert md.index("## Answer") < md.index("## Outcomes per condition")
    answer = _answer(md)
    assert "- question: H1 (primary): is TPR of cand higher than that of base?" in answer
    tpr = report["comparisons"][0]["metrics"]["tpr"]
    assert f"- result: H1: TPR cand - base: **+{tpr['delta']:.3f}**, 95% CI [" in answer
    assert f"p {tpr['p_value']:.4f}, Holm-adjusted p {tpr['p_holm']:.4f} (3 paired tasks)" \
        in answer
    assert f"- claims: **{report['claims']['status']}**" in answer
    assert "- n: 3 tasks × 3 repetitions × 2 conditions = 18 trials; 18 finished, 0 pending" \
        in answer
    last = 1005.0 + 18  # attempt ids 1..18
    assert "- dates: 1970-01-01T00:16:40Z to 1970-01-01T00:17:03Z; wall time 23 s" in answer
    assert last - 1000.0 == report["overview"]["timing"]["wall_seconds"]
    assert "- cost: $4.5000" in answer  # 18 runs at $0.25, every run accounted for
    assert "| base | scripted | m1 | commit label aaa (not checked) | none |" in answer
    assert "| cand | scripted | m1 | commit 9f0e11111111 (v3); digest `sha256:cccccccccccc…` " \
        "| none |" in answer
    provenance = md.split("## Design and provenance", 1)[1]
    assert f"- manifest digest: `sha256:{'m' * 64}`" in provenance
    assert "- lock digest: `sha256:ans`" in provenance and "- pre-registration" in provenance


def test_unknown_dates_and_cost_read_unavailable(tmp_path):
    url = f"sqlite:///{tmp_path}/u.db"
    report = compute_report(make_study(url, "u", outcome=_outcome), "u", n_resamples=200)
    answer = _answer(render_markdown(report))
    assert "- dates: unavailable; wall time unavailable" in answer
    assert "- cost: unavailable (incomplete cost accounting in 18 runs)" in answer
    assert "no hypotheses declared: the first condition is the baseline" in answer


@pytest.mark.parametrize("k", [1, 3])
def test_definitions_name_the_metrics_that_coincide(tmp_path, k):
    report = compute_report(_study(tmp_path, k=k, timed=False), "ans", n_resamples=200)
    md = render_markdown(report)
    defs = md.split("## Metric definitions", 1)[1].split("\n## ", 1)[0]
    for name in ("TPR", "RP@k", "RFR", "CPR", "NRR", "pass@k", "pass^k"):
        assert re.search(rf"^- {re.escape(name)}: ", defs, re.MULTILINE), name
    for name, m in report["conditions"].items():  # the claim holds for the numbers themselves
        metrics = m["metrics"]
        assert metrics["pass_hat_k"]["estimate"] == pytest.approx(metrics["rp_at_k"]["estimate"])
        if k == 1:
            assert metrics["tpr"]["estimate"] == pytest.approx(metrics["pass_at_k"]["estimate"])
    if k == 1:
        assert "with one repetition, TPR, RP@1, pass@1 and pass^1 are the same number" in defs
    else:
        assert "with 3 repetitions, pass^3 equals RP@3" in defs
    assert "RFR, CPR and NRR need rater scores" in defs


def test_agent_errors_sit_beside_the_outcomes(tmp_path):
    url = f"sqlite:///{tmp_path}/e.db"
    engine = make_study(url, "err", outcome=lambda t, c, r: "incorrect" if c == "cand"
                        else "correct",
                        metrics=lambda t, c, r: {"exit_code": 2, "model_calls": 0}
                        if c == "cand" and r < 3 else {"exit_code": 0, "model_calls": 4})
    report = compute_report(engine, "err", n_resamples=200)
    report.pop("agent_errors", None)
    assert "| agent errors |" not in render_markdown(report)  # a report without the count
    _, runs = study_runs(engine, "err")
    counts = count_by_condition({"condition": r.condition, "outcome": r.outcome,
                                 "metrics": r.counted_metrics} for r in runs)
    report["agent_errors"] = {n: {"runs": c.runs, "errors": c.errors, "by_kind": c.by_kind}
                              for n, c in counts.items() if n == "cand"}
    lines = render_markdown(report).splitlines()
    head = next(line for line in lines if line.startswith("| condition | correct |"))
    assert "| infrastructure_failure | agent errors | success rate |" in head
    rows = lines[lines.index(head) + 2:lines.index(head) + 4]
    assert rows[0].startswith("| base | 9 | 0 | 0 | 0 | 0 | unavailable | ")  # not 0
    assert rows[1].startswith("| cand | 0 | 9 | 0 | 0 | 0 | 6 of 9 (exited with an error "
                              "before any model call 6) | ")


def test_reports_written_with_out_link_their_transcripts(tmp_path):
    url = f"sqlite:///{tmp_path}/o.db"
    make_study(url, "outs", tasks=("t1",), k=1, outcome=_outcome)
    env = {"EVALQ_DATABASE_URL": url, "EVALQ_HOME": str(tmp_path / "home")}
    md, html = tmp_path / "one" / "r.md", tmp_path / "two" / "r.html"
    md.parent.mkdir()
    html.parent.mkdir()
    for fmt, path in (("md", md), ("html", html)):
        proc = run_cli(["report", "outs", "--format", fmt, "--out", str(path)], env)
        assert proc.returncode == 0, proc.stderr
    for trial in ("outs-t1-base-1", "outs-t1-cand-1"):
        assert f"[{trial}](transcripts/{trial}.html)" in md.read_text()
        assert f'<a href="transcripts/{trial}.html">{trial}</a>' in html.read_text()
        for folder in (md.parent, html.parent):  # the pages beside the file that links them
            assert f"transcript: {trial}" in (folder / "transcripts" / f"{trial}.html").read_text()
