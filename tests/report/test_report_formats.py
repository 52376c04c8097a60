"""Every format from one computed report: unavailable numbers, commit-comparison wording, HTML in Chromium."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from evalq.report.compute import compute_report
from evalq.report.write import RENDERERS
from headless_chromium import require_chromium
from report_native_rows import make_study

FORBIDDEN = re.compile(r"signific|p[-_ ]?value|permutation|holm|\bp \(|reject|confirmatory",
                       re.IGNORECASE)


def _outcome(task, cond, rep):
    if cond == "base":
        return "correct" if (task, rep) in {("t1", 1), ("t2", 2)} else "incorrect"
    return "grading_failure" if (task, rep) == ("t3", 3) else "correct"


def _all_formats(report):
    return {fmt: render(report) for fmt, render in RENDERERS.items()}


def test_missing_tokens_and_cost_are_unavailable_in_every_format(tmp_path):
    engine = make_study(f"sqlite:///{tmp_path}/m.db", "miss", outcome=_outcome,
                        metrics=lambda t, c, r: ({"input_tokens": 100, "output_tokens": 10,
                                                  "cost_usd": 0.5} if c == "cand" and r < 3 else {}))
    report = compute_report(engine, "miss", n_resamples=2000)
    cost = report["cost"]
    assert cost["base"]["total"] is None and cost["base"]["per_success"] is None
    assert "incomplete cost accounting" in cost["base"]["per_success_reason"]
    assert cost["cand"]["incomplete_runs"] == 3 and cost["cand"]["total"] == pytest.approx(3.0)
    assert cost["cand"]["per_success"] is None  # incomplete accounting: never a partial figure
    tokens = report["conditions"]["base"]["tokens"]["input_tokens"]
    assert tokens == {"total": None, "runs_reported": 0, "runs_missing": 9}
    rows = [r for r in report["trial_rows"] if r["condition"] == "base"]
    assert all(r["input_tokens"] is None and r["accounting_complete"] is False for r in rows)
    # grading failures are not incorrect: cand t3 has 2 valid runs out of 3
    assert report["conditions"]["cand"]["outcomes"]["grading_failure"] == 1
    assert report["conditions"]["cand"]["metrics"]["tpr"]["estimate"] == 1.0
    assert report["conditions"]["base"]["metrics"]["rfr"]["estimate"] is None
    assert report["conditions"]["base"]["metrics"]["rfr"]["reason"]
    out = _all_formats(report)
    for fmt in ("md", "html"):
        text = out[fmt]
        assert "unavailable (incomplete cost accounting" in text
        base_row = next(l for l in text.splitlines() if "base" in l and "incomplete cost" in l)
        assert "$0" not in base_row and "unavailable" in base_row
        assert "unavailable (no rater score 'regression'" in text.replace("&#x27;", "'")
    md_tokens = next(l for l in out["md"].splitlines() if l.startswith("| base | unavailable"))
    assert md_tokens.count("unavailable") >= 6
    assert '"input_tokens": null' in out["json"]


def test_commit_comparison_mode_has_intervals_and_no_significance_wording(tmp_path):
    engine = make_study(f"sqlite:///{tmp_path}/c.db", "cc", mode="commit-comparison",
                        outcome=_outcome)
    report = compute_report(engine, "cc", n_resamples=2000)
    comp = report["comparisons"][0]
    assert comp["metrics"]["tpr"]["ci_low"] is not None
    assert all(m["p_value"] is None and m["p_holm"] is None for m in comp["metrics"].values())
    assert report["inference"]["tests"] is False and report["inference"]["permutation"] is None
    # intervals only; this study's failed run and power warning weaken even those
    assert report["claims"]["status"] == "exploratory"
    assert "commit-comparison mode reports uncertainty (CIs) only" in report["claims"]["reasons"]
    out = _all_formats(report)
    for fmt in ("md", "html"):
        assert not FORBIDDEN.search(out[fmt]), FORBIDDEN.search(out[fmt]).group(0)
        assert "95% CI" in out[fmt]
    # JSON: the schema's p_value keys stay (null); no value anywhere uses such wording.
    values = []

    def walk(node):
        if isinstance(node, dict):
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
        elif isinstance(node, str):
            values.append(node)

    walk(json.loads(out["json"]))
    assert not [v for v in values if FORBIDDEN.search(v)]
    # the same study in controlled mode does show tests
    engine2 = make_study(f"sqlite:///{tmp_path}/d.db", "ctl", outcome=_outcome)
    md = RENDERERS["md"](compute_report(engine2, "ctl", n_resamples=2000))
    assert "p (permutation)" in md and "Holm" in md


def _chromium():
    return str(require_chromium())


def test_html_renders_in_headless_chromium_without_console_errors(tmp_path):
    engine = make_study(f"sqlite:///{tmp_path}/h.db", "html", outcome=_outcome,
                        hypotheses=[{"id": "H1", "metric": "tpr", "baseline": "base",
                                     "candidate": "cand", "primary": True}])
    html = RENDERERS["html"](compute_report(engine, "html", n_resamples=2000))
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in html and "<script" not in html
    page = tmp_path / "report.html"
    page.write_text(html)
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run",
             f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
             "--dump-dom", page.as_uri()]
    proc = subprocess.run([_chromium(), *flags], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert dom.count("<svg") == 3
    for label in ("Outcomes per condition", "Paired differences with 95% CIs",
                  "Task x condition pass rate"):
        assert f'aria-label="{label}"' in dom
    assert dom.count('class="bar outcome-') >= 3 and 'class="delta"' in dom
    assert dom.count('class="cell"') == 6
    console = [l for l in proc.stderr.splitlines() if "CONSOLE" in l or "Uncaught" in l
               or "Refused to" in l]
    assert console == [], console


def test_claims_without_tests_are_descriptive_until_something_weakens_them():
    from evalq.report.compute import _claims

    clean = dict(mode="commit-comparison", tests=False, warn=False, low_rel=False,
                 comparisons=[], sealed={"sealed": True}, plan={"recorded": False},
                 left_out=[])
    assert _claims(**clean)["status"] == "descriptive"
    assert _claims(**dict(clean, warn=True))["status"] == "exploratory"
    assert _claims(**dict(clean, tests=True, mode="controlled"))["status"] == "confirmatory"
