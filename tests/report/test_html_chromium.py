"""Issue 18: the HTML report laid out by headless Chromium with long condition names.

The layout is measured in the real browser (DevTools protocol, see headless_chromium.py): every
SVG label inside its chart's viewBox, every HTML cell without hidden overflow, no word or
number broken across lines, nothing wider than the page.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from headless_chromium import evaluate
from report_native_rows import make_study

from evalq.report.compute import compute_report
from evalq.report.textwidth import text_width
from evalq.report.write import RENDERERS

BASE = "claude-sonnet-baseline-without-any-repository-context"
MAP = "claude-sonnet-with-repository-map-skill-v2"
TOOLS = "claude-sonnet-with-code-search-tools-and-long-running-planner"
TASKS = ("fix-null-pointer-in-session-cache", "t2", "migrate-config-loader")


def _outcome(task, cond, rep):
    """Mixed outcomes, and no valid run at all for TOOLS on t2 (an 'unavailable' cell)."""
    if cond == TOOLS and task == "t2":
        return "grading_failure"
    if cond == BASE:
        return "correct" if rep == 1 else ("incorrect" if task != "t2" else "timed_out")
    if cond == MAP:
        return "incorrect" if (task, rep) == (TASKS[0], 3) else "correct"
    return "correct" if rep != 2 else "infrastructure_failure"


def _report_page(folder, names, tasks, outcome):
    """The HTML report of a native study: three conditions, the first the baseline of both."""
    conditions = [{"name": n, "agent": "scripted", "commit": c} for n, c in zip(names, "abc")]
    hypotheses = [{"id": f"H{i}", "metric": "tpr", "baseline": names[0], "candidate": cand,
                   "primary": True} for i, cand in enumerate(names[1:], 1)]
    engine = make_study(f"sqlite:///{folder}/r.db", "study", tasks=tasks,
                        conditions=conditions, k=3, outcome=outcome, hypotheses=hypotheses)
    page = folder / "report.html"
    page.write_text(RENDERERS["html"](compute_report(engine, "study", n_resamples=2000)))
    return page


@pytest.fixture(scope="module")
def report_page(tmp_path_factory):
    return _report_page(tmp_path_factory.mktemp("html-chromium"), (BASE, MAP, TOOLS), TASKS,
                        _outcome)


MEASURE = (Path(__file__).with_name("layout_faults.js")).read_text()


@pytest.mark.parametrize("width", [1280, 820])
def test_no_label_is_clipped_or_broken_inside_a_word(report_page, tmp_path, width):
    result = evaluate(report_page, MEASURE, tmp_path / "profile", width=width)
    assert result["faults"] == [], "\n".join(result["faults"])
    # The check looked at real content: all charts' labels, the tables, the long names.
    assert result["seen"]["svgText"] >= 40 and result["seen"]["cells"] >= 50
    assert result["seen"]["tokens"] >= 300


def test_short_names_fit_too(tmp_path):
    """Short names shrink the gutters and the charts' minimum width wraps the legend."""
    names = ("a", "b", "c")
    page = _report_page(tmp_path, names, ("t1", "t2"),
                        lambda task, cond, rep: "correct" if rep != 2 or cond == "a" else
                        ("timed_out" if task == "t1" else "infrastructure_failure"))
    result = evaluate(page, MEASURE, tmp_path / "profile", width=820)
    assert result["faults"] == [], "\n".join(result["faults"])
    assert result["seen"]["svgText"] >= 30


NAMES = r"""
(() => {
  const labels = [...document.querySelectorAll('svg text')].map(t => t.textContent);
  const cells = [...document.querySelectorAll('td, th')].map(c => c.textContent);
  const width = name => Math.max(0, ...[...document.querySelectorAll('svg text')]
    .filter(t => t.textContent === name).map(t => t.getComputedTextLength()));
  return {labels, cells, mapWidth: width(%r)};
})()
""" % MAP


def test_long_names_print_whole_and_missing_values_read_unavailable(report_page, tmp_path):
    result = evaluate(report_page, NAMES, tmp_path / "profile")
    labels = result["labels"]
    for name in (BASE, MAP, TOOLS):
        assert labels.count(name) >= 2, name  # outcome bar label and grid column header
    assert f"{MAP} - {BASE}" in labels and f"{TOOLS} - {BASE}" in labels
    assert result["mapWidth"] > 160  # the old fixed gutter could not have held it
    assert "unavailable" in labels  # TOOLS has no valid run on t2
    assert not any(t.startswith("-0.000") or "[-0.000" in t for t in labels + result["cells"])
    assert "share of planned trials" in labels and "100%" in labels


WIDTHS = r"""
(() => {
  const ctx = document.createElement('canvas').getContext('2d'), out = {};
  for (const font of ['sans-serif', '"DejaVu Sans"', '"Liberation Sans"']) {
    ctx.font = `12px ${font}`;
    out[font] = TEXTS.map(t => ctx.measureText(t).width);
  }
  return out;
})()
"""


def test_estimated_text_width_covers_what_chromium_draws(tmp_path):
    """The gutters come from textwidth's estimate: it must never be narrower than the text
    Chromium sets in the fonts here, nor so generous that charts waste a third of their width."""
    texts = [BASE, MAP, TOOLS, "infrastructure_failure", "+0.667 [0.000, +1.000]",
             "WWWW mmmm @@@", "difference (candidate - baseline)", "pass^k", "n=9, pending 1"]
    page = tmp_path / "blank.html"
    page.write_text("<!DOCTYPE html><html><body></body></html>")
    measured = evaluate(page, WIDTHS.replace("TEXTS", json.dumps(texts)), tmp_path / "profile")
    for font, widths in measured.items():
        for text, width in zip(texts, widths):
            assert 0 < width <= text_width(text, 12), (font, text, width, text_width(text, 12))
    for text, width in zip(texts, measured['"DejaVu Sans"']):
        assert text_width(text, 12) <= 1.1 * width, text


FIRST_SCREEN = r"""
(() => {
  const items = [...document.querySelectorAll('li')];
  const find = prefix => items.filter(li => li.textContent.startsWith(prefix)).map(li => {
    const box = li.getBoundingClientRect();
    return {text: li.textContent, top: box.top, bottom: box.bottom};
  });
  return {results: find('result:'), claims: find('claims:'), height: window.innerHeight,
          firstHeading: document.querySelector('h2').textContent};
})()
"""


def test_first_screen_holds_the_verdict(report_page, tmp_path):
    """At 1280x800, as the page loads, the primary results and the claims status are on
    screen, above everything else the report holds."""
    result = evaluate(report_page, FIRST_SCREEN, tmp_path / "profile", width=1280)
    assert result["firstHeading"] == "Answer"
    assert len(result["results"]) == 2 and len(result["claims"]) == 1  # two primary hypotheses
    screen = min(800, result["height"])
    for item in result["results"] + result["claims"]:
        assert 0 <= item["top"] and item["bottom"] <= screen, item
    for item in result["results"]:
        assert "95% CI [" in item["text"] and "Holm-adjusted p" in item["text"], item
    assert result["claims"][0]["text"].startswith(("claims: exploratory", "claims: confirmatory"))


TRANSCRIPT = r"""
(() => {
  const shown = el => el && el.getBoundingClientRect().height > 0;
  const items = [...document.querySelectorAll('li')].map(li => li.textContent);
  const pres = [...document.querySelectorAll('pre')].filter(shown).map(p => p.textContent);
  return {items, pres, images: document.querySelectorAll('img').length,
          text: document.body.innerText};
})()
"""
STDERR = ("Traceback (most recent call last):\n  File \"agents/fixer.py\", line 3\n"
          "FileNotFoundError: [Errno 2] <img src=x onerror=alert(1)>")


def test_transcript_page_shows_the_outcome_and_the_stderr(tmp_path):
    """The run table links each trial to a page that opens with how the run ended and the
    agent's stderr, as text."""
    from evalq.report.transcripts import write_transcripts
    from evalq.report.write import write_reports

    engine = make_study(f"sqlite:///{tmp_path}/t.db", "tp", tasks=("t1",), k=1,
                        outcome=lambda t, c, r: "incorrect" if c == "cand" else "correct",
                        metrics=lambda t, c, r: {"exit_code": 2, "model_calls": 0,
                                                 "stderr_tail": STDERR} if c == "cand" else {})
    out = tmp_path / "out"
    links = write_transcripts(engine, str(tmp_path / "artifacts"), "tp", out)
    report = compute_report(engine, "tp", n_resamples=200)
    paths = write_reports(report, out, ("json", "md", "html"), links)
    page = out / links["tp-t1-cand-1"]
    assert f'<a href="{links["tp-t1-cand-1"]}">' in paths["html"].read_text()
    assert f"]({links['tp-t1-cand-1']})" in paths["md"].read_text()
    result = evaluate(page, TRANSCRIPT, tmp_path / "profile")
    assert "outcome: incorrect" in result["items"]
    assert any("FileNotFoundError: [Errno 2] <img src=x onerror=alert(1)>" in p
               for p in result["pres"]), result["pres"]
    assert result["images"] == 0  # the agent's markup is text
